"""One document: a file parsed and chunked into rows waiting for their vectors, and the
`document` event that reports what became of a file (built by `document_event` only)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag import manifest as mf
from localgpt_cli.rag.ingest.parsing import Parsed, Rows, parse_chunk
from localgpt_cli.rag.ingest.summary import Event, elapsed_ms
from localgpt_cli.rag.walk import FoundFile

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.state import RunState

# Statuses of a file that is (or would be) in the collection: their event says how many
# chunks it has (None in a dry run, which does not cut the file). A file that failed or
# was skipped has none.
_HAS_CHUNKS = ("added", "updated", "moved", "removed")


def document_event(
    status: str,
    path: str,
    document_id: str | None,
    *,
    chunks: int | None = None,
    moved_from: str | None = None,
    code: str | None = None,
    message: str | None = None,
    reused: int | None = None,
    ms: int | None = None,
    pending: int | None = None,
    dry_run: bool = False,
) -> Event:
    """The `document` event of the README's output contract: what became of one file.

    Keys come in one order whatever the status; an optional one is left out when it does
    not apply (None), `chunks` by the status, and `dry_run` is there only in a dry run."""
    event: Event = {"type": "document", "status": status, "path": path, "document_id": document_id}
    if status in _HAS_CHUNKS:
        event["chunks"] = chunks
    optional = {
        "from": moved_from,
        "code": code,
        "message": message,
        "reused": reused,
        "ms": ms,
        "pending": pending,
    }
    event.update((key, value) for key, value in optional.items() if value is not None)
    if dry_run:
        event["dry_run"] = True
    return event


@dataclass
class Work:
    """A file that must be (re)processed, and why."""

    found: FoundFile
    sha256: str
    entry: mf.Entry | None  # its manifest entry, if any
    # (document id, chunk hashes in order) of rows stored at this path that no manifest
    # entry vouches for (the manifest was lost, or a run was killed before writing it)
    stored: tuple[str, list[str]] | None = None

    def status(self) -> str:
        """`updated` if the file is a document already, else `added`."""
        old_ok = self.entry is not None and self.entry.status == mf.OK
        return "updated" if old_ok or self.stored else "added"

    def document_id(self, taken: set[str]) -> str:
        """The id the document keeps (its entry's, or its stored rows'), else a new one
        that none of `taken` uses; added to `taken`."""
        doc_id = (
            (self.entry.document_id if self.entry else "")
            or (self.stored[0] if self.stored else "")
            or document_id_for(self.found.path, taken)
        )
        taken.add(doc_id)
        return doc_id


class Prepared:
    """A processed document waiting for its embeddings and its commit."""

    def __init__(self, document_id: str, path: str, status: str, rows: Rows) -> None:
        self.document_id = document_id
        self.path = path
        self.status = status
        self.rows = rows
        self.chunks = len(rows)
        self.vectors: list[Any] = [None] * self.chunks
        self.waiting = 0  # chunks whose vector is still queued
        self.stored = False  # rows of this document are in the table (merge, not append)
        self.entry: mf.Entry | None = None
        self.reused: int | None = None  # chunks whose vector the cache had
        self.ms = 0  # reading it took
        self.code: str | None = None  # why a file that was a document is removed
        self.message: str | None = None

    def deliver(self, index: int, vector: Any) -> None:
        self.vectors[index] = vector
        self.waiting -= 1

    def event(self) -> Event:
        """Its `document` event, once committed: `pending` counts the chunks stored without
        a vector."""
        return document_event(
            self.status,
            self.path,
            self.document_id,
            chunks=self.chunks,
            code=self.code,
            message=self.message,
            reused=self.reused,
            ms=self.ms,
            pending=sum(v is None for v in self.vectors),
        )


def document_id_for(path: str, taken: set[str]) -> str:
    """A new document's id: derived from its path, so the same corpus ingested twice (or a
    run killed and run again) gets the same ids; salted if a document that moved away from
    this path still uses it."""
    salt = 0
    while True:
        key = path if salt == 0 else f"{path}\0{salt}"
        doc_id = hashlib.sha256(key.encode()).hexdigest()[:16]
        if doc_id not in taken:
            return doc_id
        salt += 1


def read_document(
    state: RunState, item: Work, doc_id: str, status: str, parsed: Parsed | None = None
) -> Iterator[Event | Prepared]:
    """Take one file parsed and chunked (here, unless a worker process did it), take the
    vectors the cache has and queue the rest; yields its events, then the `Prepared`
    (nothing if the file failed or is binary)."""
    f = item.found
    if parsed is None:
        parsed = parse_chunk(state.opts, f.path, bool(item.sha256), doc_id)
    start = time.perf_counter() - parsed.seconds
    if parsed.code == "binary_file":
        yield from _skip(state, item, doc_id, None, parsed.code, str(parsed.message), start)
        return
    if parsed.code is not None or parsed.doc is None:
        yield failed_event(state, item, str(parsed.code), str(parsed.message), start)
        return
    if not parsed.rows:  # an empty file is not a document: nothing to find, nothing to list
        message = f"{f.path}: no text (empty file); skipped"
        yield from _skip(state, item, doc_id, parsed.doc.type, "empty", message, start)
        return
    doc = Prepared(doc_id, f.path, status, parsed.rows)
    yield from _prepare(state, item, doc, parsed, start)


def _prepare(
    state: RunState, item: Work, doc: Prepared, got: Parsed, start: float
) -> Iterator[Event | Prepared]:
    """Queue for embedding the chunks (titled) whose input the cache lacks."""
    f, chunks, parsed = item.found, doc.chunks, got.doc
    assert parsed is not None
    if item.stored is not None and item.stored[1] == doc.rows.hashes and not state.opts.force:
        # The rows stored for this path are what this run would write: only the
        # manifest entry was missing, and it is all that is written.
        state.summary.unchanged += 1
        state.manifest.put(state.entry(f, item.sha256, doc.document_id, parsed.type, chunks, mf.OK))
        yield {"type": "progress", "files": 1, "chunks": 0}
        return
    for note in parsed.warnings:
        yield {"type": "warning", "code": "parse_warning", "message": f"{f.path}: {note}"}
    truncated, doc.reused = _queue_inputs(state, doc, got.title)
    if truncated:
        yield {
            "type": "warning",
            "code": "embed_input_truncated",
            "message": f"{f.path}: {truncated} chunk(s) longer than the embed limit were "
            "cut for embedding (the stored text is whole); lower --chunk-size to avoid it.",
        }
    doc.stored = state.table_has(doc.document_id)
    doc.entry = state.entry(f, item.sha256, doc.document_id, parsed.type, chunks, mf.OK)
    doc.ms = elapsed_ms(start)
    state.summary.reused += doc.reused
    state.summary.chunks += chunks
    state.summary.bytes += f.size
    yield {"type": "progress", "files": 1, "chunks": chunks}
    yield doc


def _queue_inputs(state: RunState, doc: Prepared, title: str | None) -> tuple[int, int]:
    """Take the vectors the cache has for `doc`, queue the other inputs: how many of
    those had to be cut to the embed limit, and how many the cache had.

    Once the server is found unreachable nothing is queued: the chunks the cache lacks
    are stored without a vector (and those cut are counted the same way)."""
    rows, queue = doc.rows, state.queue
    hashes = rows.hashes
    cached = queue.cached(hashes)
    if queue.down is not None:
        reused = 0
        for i, h in enumerate(hashes):
            if h in cached:
                doc.vectors[i], reused = cached[h], reused + 1
        if not queue.cuts(rows.longest):
            return 0, reused
        cut = set()
        for i, h in enumerate(hashes):
            if h not in cached and queue.cuts(len(rows.body(i, title))):
                cut.add(h)  # a text queued twice would have been sent (and cut) once
        return len(cut), reused
    truncated = 0
    for i, h in enumerate(hashes):
        if h in cached:
            doc.vectors[i] = cached[h]
        else:
            doc.waiting += 1
            truncated += queue.put(rows.body(i, title), h, (doc, i))
    return truncated, doc.chunks - doc.waiting


def _skip(
    state: RunState,
    item: Work,
    doc_id: str,
    doc_type: str | None,
    code: str,
    message: str,
    start: float,
) -> Iterator[Event | Prepared]:
    """A file with no text to index (binary, empty): remembered as skipped, so it costs a
    stat next time; if it was a document until now, its rows go with the next commit."""
    f = item.found
    skipped = state.entry(f, item.sha256, "", doc_type, 0, mf.SKIPPED)
    if not state.table_has(doc_id):
        state.manifest.put(skipped)
        yield skipped_event(state, f.path, code, message)
        return
    state.summary.skipped += 1  # and counted as removed when its event is yielded
    gone = Prepared(doc_id, f.path, "removed", Rows())
    gone.stored, gone.entry = True, skipped
    gone.code, gone.message, gone.ms = code, message, elapsed_ms(start)
    yield gone


def skipped_event(state: RunState, path: str, code: str, message: str) -> Event:
    """The event of a file counted as skipped: every file counted has one."""
    return state.count(
        document_event(
            "skipped", path, None, code=code, message=message, dry_run=state.opts.dry_run
        )
    )


def bad_name_event(state: RunState, f: FoundFile) -> Event:
    """A file whose name is not UTF-8 (old archives, another system's encoding): the
    store, the manifest and NDJSON all hold UTF-8, so it fails alone, shown with the
    bad bytes escaped (as `ls -b` does), and nothing is recorded for it."""
    shown = os.fsencode(f.path).decode("utf-8", "backslashreplace")
    message = (
        f"{shown}: the file name is not valid UTF-8, so it cannot be stored; "
        "rename it (e.g. with convmv) to ingest it."
    )
    return state.count(
        document_event(
            "failed",
            shown,
            None,
            code="invalid_file_name",
            message=message,
            dry_run=state.opts.dry_run,
        )
    )


def failed_event(state: RunState, item: Work, code: str, message: str, start: float) -> Event:
    """The event of a file that could not be read, parsed or cut (it fails alone: the run
    goes on, and exits 5 at the end)."""
    f = item.found
    # Keep the last good document (if any) searchable; record the failure for `docs list`.
    if item.entry is None or item.entry.status != mf.OK:
        state.manifest.put(
            state.entry(f, item.sha256, "", None, 0, mf.FAILED, f"{code}: {message}")
        )
    state.summary.bytes += f.size
    document_id = item.entry.document_id if item.entry else None
    return state.count(
        document_event(
            "failed", f.path, document_id, code=code, message=message, ms=elapsed_ms(start)
        )
    )
