"""The collection an ingest run writes: opened or created, its embedding model adopted or
checked, and re-indexed (emptied, the paths named ingested again) when `--force` asks for
another model."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from localgpt_cli.errors import InvalidInput, LocalGPTError
from localgpt_cli.rag.ingest.document import document_event
from localgpt_cli.rag.ingest.summary import Event
from localgpt_cli.rag.walk import FoundFile, under

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder
    from localgpt_cli.rag.ingest.state import RunState
    from localgpt_cli.rag.store import DocumentSummary


def open_collection(
    state: RunState, files: list[FoundFile], client: Embedder
) -> Iterator[Event]:
    """Set the run's collection: None in a dry run on a collection that does not exist.
    `client` is the run's embedder, asked once before a re-index drops anything."""
    exists = _collection_exists(state)
    if state.opts.dry_run:
        state.coll = state.store.collection(state.name) if exists else None
        if state.coll is not None:
            _adopt_or_check_model(state)
        return
    if exists:
        state.coll = state.store.collection(state.name)
        if _adopt_or_check_model(state):
            yield from _reindex(state, files, client)
    if state.coll is None:
        state.coll = state.store.collection(state.name, create=True)
    # The model is recorded with the first rows (see batch.commit), not here: a run that
    # fails before storing anything (a model that is not pulled) must not pin it.


def _reindex(state: RunState, files: list[FoundFile], client: Embedder) -> Iterator[Event]:
    """Drop the collection, so the paths named are ingested again with the model asked
    for; the documents whose file is gone are reported removed."""
    assert state.coll is not None
    vanished = _reindex_losses(state, files)
    _check_embedder(state, client)
    yield {
        "type": "warning",
        "code": "reindex",
        "message": f"Collection {state.name!r} was embedded with "
        f"{state.coll.model}; --force re-indexes it with {state.model}: its "
        f"documents are removed and the paths given are ingested again.",
    }
    state.library.remove(None, lambda: state.store.drop_collection(state.name))
    state.coll = None
    for doc in vanished:
        yield state.count(document_event("removed", doc.path, doc.document_id, chunks=doc.chunks))


def _reindex_losses(state: RunState, files: list[FoundFile]) -> list[DocumentSummary]:
    """The documents a re-index drops for good: those whose file is gone. Refuses
    (nothing changed) when it would also drop documents whose files exist but were
    not named in this run: `--force` re-embeds what was named, nothing else."""
    assert state.coll is not None
    named = {f.path for f in files}
    stored = [d for d in state.coll.documents() if d.path not in named]
    # Outside the paths named, a missing file may be an unmounted drive or another
    # machine's (a shared store): only files gone from under this run's roots are losses.
    kept = [d for d in stored if not under(d.path, state.roots) or os.path.exists(d.path)]
    if kept:
        raise InvalidInput(
            f"Re-indexing collection {state.name!r} with {state.model} replaces all of its "
            f"documents, and {len(kept)} of them are not among the paths given "
            f"(e.g. {kept[0].path}).",
            hint="Nothing was changed. Name every file or folder the collection holds "
            f"(localgpt docs list -C {state.name} shows them), or use another collection "
            f"for {state.model} with -C NAME.",
        )
    return stored


def _collection_exists(state: RunState) -> bool:
    return state.store.exists(state.name)  # a missing folder is not created: no names


def _adopt_or_check_model(state: RunState) -> bool:
    """Use the collection's model unless one was asked for; True if --force must
    re-index because the one asked for differs."""
    assert state.coll is not None
    have = state.coll.model
    if have is None or have == state.model:
        return False
    if not state.model_explicit:
        state.model = have
        return False
    if state.opts.force and not state.opts.dry_run:
        return True
    state.coll.check_model(state.model)  # raises, with the command to re-index
    return False


def _check_embedder(state: RunState, client: Embedder) -> None:
    """Embed one short text with the new model before the collection is dropped: a model
    name with a typo, or a server that is down, must leave the collection as it was."""
    try:
        client.embed(state.model, ["re-index check"], batch_size=1)
    except LocalGPTError as exc:
        kept = f"Nothing was changed: collection {state.name!r} keeps its documents."
        exc.hint = f"{kept} {exc.hint}" if exc.hint else kept
        raise
