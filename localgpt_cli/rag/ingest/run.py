"""One ingest run over one collection, from the walk to the summary (see the package
docstring for the events it yields)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import LocalGPTError
from localgpt_cli.rag.ingest import backlog, plan
from localgpt_cli.rag.ingest.batch import process
from localgpt_cli.rag.ingest.collection import open_collection
from localgpt_cli.rag.ingest.document import Work, bad_name_event, skipped_event
from localgpt_cli.rag.ingest.options import IngestOptions
from localgpt_cli.rag.ingest.state import RunState
from localgpt_cli.rag.ingest.summary import Event, Summary, elapsed_ms
from localgpt_cli.rag.library import Library, locked

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder
    from localgpt_cli.rag.store import Store


class Ingest:
    """One ingest run over one collection."""

    def __init__(
        self,
        options: IngestOptions,
        *,
        store: Store,
        collection: str,
        model: str,
        model_explicit: bool,
        client: Embedder,
        home: Path,
        wait_lock: float = 0.0,
        fallback: bool = False,
    ) -> None:
        self.state = RunState(
            options,
            store=store,
            collection=collection,
            model=model,
            model_explicit=model_explicit,
            home=home,
        )
        # `model` is the in-process embedder standing in for an unreachable Ollama: said
        # in the summary and recorded on the collection it creates (`docs collections`).
        self.state.fallback = self.state.summary.fallback = fallback
        self.client = client
        self.wait_lock = wait_lock

    @property
    def summary(self) -> Summary:
        return self.state.summary

    @property
    def model(self) -> str:
        """The embedding model: the collection's own unless one was asked for."""
        return self.state.model

    @property
    def down(self) -> LocalGPTError | None:
        """Why embeddings could not be made (the server was unreachable), if so."""
        return self.state.down

    def run(self) -> Iterator[Event]:
        """Do the run, yielding events; the last one is the summary."""
        state = self.state
        start = time.perf_counter()
        if state.opts.dry_run:
            state.library = Library(state.store.uri, state.home, state.name)
            yield from self._run()
        else:
            with locked(state.store.uri, state.home, state.name, self.wait_lock) as library:
                state.library = library
                yield from self._run()
        state.summary.ms = elapsed_ms(start)
        yield state.summary.record()

    def _run(self) -> Iterator[Event]:
        from localgpt_cli.llm.local import is_local
        from localgpt_cli.llm.provider import EmbedStats
        from localgpt_cli.rag.embedding import EmbedQueue

        state = self.state
        files, irregular = plan.found_files(state)
        yield from irregular
        yield from open_collection(state, files, self.client)
        state.manifest = state.library.manifest
        state.stats = EmbedStats()
        state.queue = EmbedQueue(
            self.client,
            state.model,
            state.coll,
            batch_size=state.opts.batch_size,
            stats=state.stats,
            # the in-process model already uses every core for one request
            concurrency=1 if is_local(state.model) else state.opts.concurrency,
        )
        if state.coll is not None:
            yield from backlog.embed_backlog(state)
        found = plan.classify(state, files)
        yield found.event()
        for f in found.unnameable:
            yield bad_name_event(state, f)
        for f in found.sniffed:
            yield skipped_event(state, f.path, "binary_file", f"{f.path}: binary file; skipped")
        for new, old in found.moves:
            yield plan.move(state, new, old)
        yield from self._process(found.work)
        if state.opts.prune:
            yield from plan.prune(state, found.gone)
        yield from self._finish()

    def _process(self, work: list[Work]) -> Iterator[Event]:
        """Read, embed and commit the files that changed (the Ray engine overrides it)."""
        yield from process(self.state, work)

    def _finish(self) -> Iterator[Event]:
        """The end of a run: the pending count, the manifest compacted, index upkeep."""
        state = self.state
        # Counted (and the collection's pending mark set) before the optimize, whose index
        # checks count the rows with vectors: cheap once the mark says none are missing.
        state.summary.pending_embeddings = backlog.pending_at_end(state)
        state.queue.forget()
        if not state.opts.dry_run:
            state.manifest.compact()
            repair = self._index_repair()
            if repair:
                yield {"type": "warning", "code": "index_repair", "message": repair}
            if state.coll is not None and (state.wrote or repair):
                # Once per run, not per commit: optimizing every 100k rows was measured
                # slower (47 s vs 18 s at 200 MB) and no lighter (peak RSS 651 vs 508 MB).
                yield {"type": "progress", "phase": "optimizing"}
                started = time.perf_counter()
                state.library.check_lock()
                state.coll.optimize()
                state.summary.optimize_ms = elapsed_ms(started)
        state.summary.embed_requests = state.stats.requests
        state.summary.embed_ms = round(state.stats.seconds * 1000)
        state.summary.embedded = state.queue.embedded
        state.summary.embedder = state.model

    def _index_repair(self) -> str | None:
        """Why a run that changed nothing must still optimize: an earlier run was killed
        before its final optimize, leaving rows unindexed or no full-text index, which
        nothing else would ever fix (see store.IndexHealth)."""
        state = self.state
        if state.wrote or state.coll is None:
            return None
        problem = state.coll.index_health().problem()
        if problem is None:
            return None
        return (
            f"Collection {state.name!r} had {problem} (an earlier run was interrupted): "
            "rebuilding the indexes."
        )
