"""Batching: documents read one at a time, their embedding inputs sent in full batches
across documents (rag/embedding.py's EmbedQueue), and the documents whose vectors are all
in committed together, in one LanceDB commit per group.

A group's commit is written on a thread while the next documents are read (`Commits`):
the write took ~9% of the ingest process's time on the 100 MB corpus, waiting on
LanceDB, which the reading of the next files now overlaps. At most one write is in
flight; its manifest entries and `document` events come once it is done (the manifest's
"written before recorded" rule), in the files' order as before."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any

from localgpt_cli import threads
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
    commits = Commits(state)
    try:
        for item, doc_id, got in parsed:
            for event_or_doc in read_document(state, item, doc_id, item.status(), got):
                if isinstance(event_or_doc, Prepared):
                    waiting.append(event_or_doc)
                else:
                    yield event_or_doc
            _deliver(state.queue.drain())
            yield from state.check_down()
            ready = _ready(waiting)
            rows = sum(d.chunks for d in waiting[:ready])
            due = time.monotonic() - last_commit >= state.opts.commit_seconds
            if ready and (rows >= state.opts.commit_rows or due):
                yield from commits.commit(waiting[:ready])
                del waiting[:ready]
                last_commit = time.monotonic()
        if waiting:
            _deliver(state.queue.drain(everything=True))
            yield from state.check_down()
            yield from commits.commit(waiting)
        yield from commits.settle()
    finally:
        commits.wait()  # an error, Ctrl-C: the write in flight ends, and is not recorded


def _ready(waiting: list[Prepared]) -> int:
    """How many documents, from the first, have all their vectors (or None, server down)."""
    ready = 0
    while ready < len(waiting) and waiting[ready].waiting == 0:
        ready += 1
    return ready


def _deliver(delivered: list[tuple[Any, Any]]) -> None:
    for (doc, index), vector in delivered:
        doc.deliver(index, vector)


class Commits:
    """Group commits, each written on a thread: at most one in flight."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.flight: tuple[list[Prepared], Future[None]] | None = None
        # The embedding cache reads the table: not while a write is in flight.
        state.queue.before_lookup = self.wait

    def commit(self, docs: list[Prepared]) -> Iterator[Event]:
        """Record the group in flight, then start writing these documents' rows."""
        yield from self.settle()
        state = self.state
        state.library.check_lock()
        ids = [d.document_id for d in docs if d.chunks or d.stored]
        if not ids:
            yield from _record(state, docs)
            return
        coll = state.coll
        assert coll is not None
        if coll.model is None:
            coll.set_model(state.model, fallback=state.fallback)
        vectors = list(chain.from_iterable(d.vectors for d in docs))
        # write_rows marks the collection pending before such rows are stored
        state.pending_written += sum(v is None for v in vectors)
        append = not any(d.stored for d in docs)
        full = [d.rows.columns for d in docs if d.chunks]
        columns = {
            name: list(chain.from_iterable(c[name] for c in full)) for name in full[0]
        } if full else {}  # fmt: skip
        write = partial(coll.write_rows, ids, columns, vectors, append=append)
        self.flight = (docs, threads.start(write, "ingest-commit"))

    def wait(self) -> None:
        """Wait for the write in flight, if any (raising its error)."""
        if self.flight is not None:
            self.flight[1].result()

    def settle(self) -> Iterator[Event]:
        """Once the write in flight is done: its manifest entries, then its events."""
        if self.flight is None:
            return
        docs, future = self.flight
        self.flight = None
        future.result()
        state = self.state
        state.wrote = True
        state.note_stored(d.document_id for d in docs if d.chunks)
        state.queue.remember(
            h for d in docs for h, v in zip(d.rows.hashes, d.vectors, strict=True) if v is not None
        )
        yield from _record(state, docs)


def _record(state: RunState, docs: list[Prepared]) -> Iterator[Event]:
    """Committed documents: their manifest entries, then their events."""
    for d in docs:
        assert d.entry is not None
        state.manifest.put(d.entry)
    state.manifest.flush()
    for d in docs:
        yield state.count(d.event())
