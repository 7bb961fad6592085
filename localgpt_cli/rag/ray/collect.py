"""The driver's side of the Ray pipeline: the blocks that come back committed, then
recorded in the manifest, then reported, as the plain engine's `ingest/batch.py` does.

Blocks are committed in groups (the plain engine's `commit_rows` / `commit_seconds`
rule); a group is one Lance commit that adds the workers' fragments and deletes the old
rows of the documents they replace. A file whose block never came back (its worker was
lost) fails with `worker_lost`; the next run tries it again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from localgpt_cli.errors import OllamaUnreachable
from localgpt_cli.rag import manifest as mf
from localgpt_cli.rag.ingest.document import document_event, failed_event, skipped_event

if TYPE_CHECKING:
    import pyarrow as pa

    from localgpt_cli.rag.ingest.document import Work
    from localgpt_cli.rag.ingest.state import RunState
    from localgpt_cli.rag.ingest.summary import Event


@dataclass
class Planned:
    """A file sent to the cluster: its work item, its status and its document id."""

    work: Work
    status: str
    document_id: str

    def row(self) -> dict[str, Any]:
        """What a parse task is given about it."""
        stored = self.work.stored
        return {
            "path": self.work.found.path,
            "document_id": self.document_id,
            "sha256": self.work.sha256,
            "stored": stored[1] if stored is not None else None,
        }


def planned(state: RunState, work: list[Work]) -> list[Planned]:
    """Each file's status and document id, decided here as the plain engine does."""
    taken = set(state.manifest.ids())
    return [Planned(w, w.status(), w.document_id(taken)) for w in work]


class Collector:
    """Commits the blocks that come back and yields their files' events."""

    def __init__(self, state: RunState, items: list[Planned]) -> None:
        self.state = state
        self.items = {item.document_id: item for item in items}
        self.waiting: list[tuple[list[bytes], list[dict[str, Any]]]] = []
        self.last_commit = time.monotonic()

    def take(self, block: pa.Table) -> Iterator[Event]:
        """One block of results (one row per pipeline block); commits when due."""
        for row in block.to_pylist():
            docs = orjson.loads(row["docs"])
            self._count_embeddings(orjson.loads(row["stats"]))
            yield from self.state.check_down()
            for doc in docs:
                yield {"type": "progress", "files": 1, "chunks": doc.get("chunks", 0)}
            self.waiting.append((row["fragments"], docs))
        rows = sum(d.get("chunks", 0) for _, docs in self.waiting for d in docs)
        due = time.monotonic() - self.last_commit >= self.state.opts.commit_seconds
        if rows >= self.state.opts.commit_rows or due:
            yield from self._commit()

    def finish(self) -> Iterator[Event]:
        """The last group committed; the files whose block never came back, failed."""
        yield from self._commit()
        for item in self.items.values():
            path = item.work.found.path
            message = (
                f"{path}: the Ray worker processing it was lost (killed, or out of "
                "memory); the next run tries it again."
            )
            yield failed_event(self.state, item.work, "worker_lost", message, time.perf_counter())

    def _count_embeddings(self, stats: list[dict[str, Any]]) -> None:
        state = self.state
        for s in stats:
            state.stats.requests += s["requests"]
            state.stats.seconds += s["seconds"]
            state.queue.embedded += s["embedded"]
            if s["down"] and state.queue.down is None:
                state.queue.down = OllamaUnreachable(s["down"])

    def _commit(self) -> Iterator[Event]:
        from localgpt_cli.rag.store import fragments

        state = self.state
        coll = state.coll
        assert coll is not None
        docs = [d for _, group in self.waiting for d in group]
        written = [d for d in docs if d["outcome"] == "ok"]
        replaced = [d["document_id"] for d in docs if _replaces(state, d)]
        frags = [f for group, _ in self.waiting for f in group]
        self.waiting, self.last_commit = [], time.monotonic()
        if frags or replaced:
            state.library.check_lock()
            if coll.model is None and written:
                coll.set_model(state.model, fallback=state.fallback)
            missing = sum(len(d.get("missing", ())) for d in written)
            fragments.commit(coll, frags, replaced, pending=missing > 0)
            state.pending_written += missing
            state.wrote = True
            state.note_stored(d["document_id"] for d in written)
        events = [e for d in docs for e in self._record(d)]
        state.manifest.flush()
        yield from events

    def _record(self, doc: dict[str, Any]) -> list[Event]:
        """One committed file's manifest entry and its events (warnings first)."""
        state, item = self.state, self.items.pop(doc["document_id"])
        f, outcome = item.work.found, doc["outcome"]
        start = time.perf_counter() - doc.get("ms", 0) / 1000
        if outcome == "failed":
            return [failed_event(state, item.work, doc["code"], doc["message"], start)]
        if outcome == "skipped":
            return _skipped(state, item, doc)
        entry = state.entry(
            f, item.work.sha256, item.document_id, doc.get("type"), doc["chunks"], mf.OK
        )
        state.manifest.put(entry)
        if outcome == "unchanged":
            state.summary.unchanged += 1
            return []
        state.summary.reused += doc["reused"]
        state.summary.chunks += doc["chunks"]
        state.summary.bytes += f.size
        return [*_warnings(f.path, doc), state.count(_document(item, doc))]


def _replaces(state: RunState, doc: dict[str, Any]) -> bool:
    """Whether the commit deletes the document's stored rows (new ones or none replace
    them)."""
    if doc["outcome"] not in ("ok", "skipped"):
        return False
    return state.table_has(doc["document_id"])


def _document(item: Planned, doc: dict[str, Any]) -> Event:
    return document_event(
        item.status,
        item.work.found.path,
        item.document_id,
        chunks=doc["chunks"],
        reused=doc["reused"],
        ms=doc.get("ms", 0),
        pending=len(doc.get("missing", ())),
    )


def _warnings(path: str, doc: dict[str, Any]) -> list[Event]:
    events: list[Event] = [
        {"type": "warning", "code": "parse_warning", "message": f"{path}: {note}"}
        for note in doc.get("warnings", ())
    ]
    if doc.get("truncated"):
        events.append(
            {
                "type": "warning",
                "code": "embed_input_truncated",
                "message": f"{path}: {doc['truncated']} chunk(s) longer than the embed limit "
                "were cut for embedding (the stored text is whole); lower --chunk-size to "
                "avoid it.",
            }
        )
    return events


def _skipped(state: RunState, item: Planned, doc: dict[str, Any]) -> list[Event]:
    """A file with no text: remembered as skipped; a document until now is removed (its
    rows went with this commit)."""
    f = item.work.found
    entry = state.entry(f, item.work.sha256, "", doc.get("type"), 0, mf.SKIPPED)
    state.manifest.put(entry)
    if not state.table_has(item.document_id):
        return [skipped_event(state, f.path, doc["code"], doc["message"])]
    state.summary.skipped += 1
    event = document_event(
        "removed", f.path, item.document_id, chunks=0,
        code=doc["code"], message=doc["message"], ms=doc.get("ms", 0),
    )  # fmt: skip
    return [state.count(event)]
