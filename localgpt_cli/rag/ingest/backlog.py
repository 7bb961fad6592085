"""The pending-embedding backlog: chunks stored without vectors (the embedding server was
down) that a later run embeds, before anything new; and the count left at the end of a run,
kept in the collection's pending mark so that the next run can skip counting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from localgpt_cli.rag.ingest.summary import Event

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.state import RunState

# Pending chunks (stored while Ollama was down) fetched and filled per commit.
PENDING_ROWS = 1024


def pending_at_end(state: RunState) -> int:
    """Chunks left without a vector at the end of the run.

    Counting reads the whole vector column, so it is done only when rows may be pending
    (some were left from before, or this run stored some), and the collection's pending
    mark is updated with the answer so that the next run can skip the count."""
    coll = state.coll
    if coll is None:
        return 0
    if state.opts.dry_run:
        return state.pending_at_start
    left_over = state.pending_at_start and not state.pending_drained
    if not (left_over or state.pending_written):
        if state.wrote or state.pending_at_start:
            coll.mark_pending(False)  # a no-op when already marked
        return 0
    pending = coll.count_without_vectors()
    coll.mark_pending(pending > 0)
    return pending


def embed_backlog(state: RunState) -> Iterator[Event]:
    """Embed chunks an earlier run stored without vectors, before anything new."""
    from localgpt_cli.rag.titles import embed_body

    coll = state.coll
    assert coll is not None
    if coll.pending_marked() is False:
        return
    state.pending_at_start = coll.count_without_vectors()
    if state.opts.dry_run:
        return
    if not state.pending_at_start:
        if coll.count():
            coll.mark_pending(False)  # a collection from before the mark existed
        return
    yield {"type": "progress", "phase": "pending", "chunks_total": state.pending_at_start}
    queue = state.queue
    while state.down is None:
        rows = coll.pending(limit=PENDING_ROWS)
        if not rows:
            state.pending_drained = True
            break
        cached = queue.cached([r.text_hash for r in rows])
        done = [(r.chunk_id, cached[r.text_hash]) for r in rows if r.text_hash in cached]
        state.summary.reused += len(done)
        for r in rows:
            if r.text_hash not in cached:  # the same input as when it was stored
                queue.put(embed_body(r.title, r.text), r.text_hash, r.chunk_id)
        delivered = queue.drain(everything=True)
        yield from state.check_down()
        done += [(ref, v) for ref, v in delivered if v is not None]
        state.library.check_lock()
        if not done or coll.set_vectors([c for c, _ in done], [v for _, v in done]) == 0:
            break
        state.wrote = True
        yield {"type": "progress", "phase": "pending", "chunks": len(done)}
