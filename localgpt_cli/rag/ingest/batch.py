"""Batching: documents read one at a time, their embedding inputs sent in full batches
across documents (rag/embedding.py's EmbedQueue), and the documents whose vectors are all
in committed together, in one LanceDB commit per group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.ingest.document import (
    Prepared,
    Work,
    document_event,
    read_document,
)
from localgpt_cli.rag.ingest.parsing import Parsed
from localgpt_cli.rag.ingest.summary import Event

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.state import RunState


def process(state: RunState, work: list[Work]) -> Iterator[Event]:
    """Read every file of `work`, in order, committing each group of documents once its
    vectors are in and it is large enough (`commit_rows`) or old enough (`commit_seconds`).
    Files are parsed by worker processes (`pool.py`) when the run has several and enough
    to parse; their results are taken in the same order, so the events are the same."""
    from localgpt_cli.rag.ingest.pool import ParsePool, worth_a_pool

    taken = set(state.manifest.ids())  # ids in use, so a new one never collides
    tasks = ((item, item.document_id(taken)) for item in work)
    if state.opts.dry_run:
        for item, doc_id in tasks:
            event = document_event(item.status(), item.found.path, doc_id, chunks=None,
                                   dry_run=True)  # fmt: skip
            yield state.count(event)
        return
    if not worth_a_pool(state.opts.workers, work):
        yield from _read_all(state, ((item, doc_id, None) for item, doc_id in tasks))
        return
    with ParsePool(state.opts, state.opts.workers) as pool:
        yield from _read_all(state, pool.parsed(tasks))


def _read_all(
    state: RunState, parsed: Iterator[tuple[Work, str, Parsed | None]]
) -> Iterator[Event]:
    """Take each file's chunks (parsed here when None), in order, and commit them."""
    waiting: list[Prepared] = []  # processed, in order, not yet committed
    last_commit = time.monotonic()
    for item, doc_id, got in parsed:
        for event_or_doc in read_document(state, item, doc_id, item.status(), got):
            if isinstance(event_or_doc, Prepared):
                waiting.append(event_or_doc)
            else:
                yield event_or_doc
        _deliver(state.queue.drain())
        yield from state.check_down()
        ready = _ready(waiting)
        rows = sum(len(d.chunks) for d in waiting[:ready])
        due = time.monotonic() - last_commit >= state.opts.commit_seconds
        if ready and (rows >= state.opts.commit_rows or due):
            yield from commit(state, waiting[:ready])
            del waiting[:ready]
            last_commit = time.monotonic()
    if waiting:
        _deliver(state.queue.drain(everything=True))
        yield from state.check_down()
        yield from commit(state, waiting)


def _ready(waiting: list[Prepared]) -> int:
    """How many documents, from the first, have all their vectors (or None, server down)."""
    ready = 0
    while ready < len(waiting) and waiting[ready].waiting == 0:
        ready += 1
    return ready


def _deliver(delivered: list[tuple[Any, Any]]) -> None:
    for (doc, index), vector in delivered:
        doc.deliver(index, vector)


def commit(state: RunState, docs: list[Prepared]) -> Iterator[Event]:
    """One commit for these documents, then their manifest entries, then their events."""
    state.library.check_lock()
    ids = [d.document_id for d in docs if d.chunks or d.stored]
    if ids:
        coll = state.coll
        assert coll is not None
        if coll.model is None:
            coll.set_model(state.model, fallback=state.fallback)
        chunks = [c for d in docs for c in d.chunks]
        vectors = [v for d in docs for v in d.vectors]
        # write_documents marks the collection pending before such rows are stored
        state.pending_written += sum(v is None for v in vectors)
        append = not any(d.stored for d in docs)
        hashes = [h for d in docs for h in d.hashes]
        coll.write_documents(ids, chunks, vectors, append=append, hashes=hashes)
        state.wrote = True
        state.note_stored(d.document_id for d in docs if d.chunks)
        state.queue.remember(
            h for d in docs for h, v in zip(d.hashes, d.vectors, strict=True) if v is not None
        )
    for d in docs:
        assert d.entry is not None
        state.manifest.put(d.entry)
    state.manifest.flush()
    for d in docs:
        yield state.count(d.event())
