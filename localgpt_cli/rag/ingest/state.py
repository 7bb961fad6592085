"""What the parts of one ingest run share: its options, the collection, the manifest, the
embedding queue, the counts, and the few facts one part learns for another."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import LocalGPTError
from localgpt_cli.rag import manifest as mf
from localgpt_cli.rag.ingest.options import IngestOptions, options_key
from localgpt_cli.rag.ingest.summary import Event, Summary
from localgpt_cli.rag.walk import FoundFile

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import EmbedStats
    from localgpt_cli.rag.embedding import EmbedQueue
    from localgpt_cli.rag.library import Library
    from localgpt_cli.rag.store import Collection, Store


class RunState:
    """One run's shared state. The parts of a run (plan, document, batch, backlog) are
    functions over it rather than methods of one class, so each can be read alone; what
    they tell each other (rows were written, the server is down) is kept here."""

    def __init__(
        self,
        options: IngestOptions,
        *,
        store: Store,
        collection: str,
        model: str,
        model_explicit: bool,
        home: Path,
    ) -> None:
        self.opts = options
        self.store = store
        self.name = collection
        self.model = model
        self.model_explicit = model_explicit
        self.fallback = False  # `model` stands in for an unreachable Ollama (cli/ingest.py)
        self.home = home  # where a manifest from before the sidecar may still be
        self.summary = Summary(dry_run=options.dry_run)
        self.down: LocalGPTError | None = None  # why embeddings could not be made
        self.coll: Collection | None = None
        self.library: Library
        self.manifest: mf.Manifest
        self.queue: EmbedQueue
        self.stats: EmbedStats
        self.wrote = False  # this run changed the table: it optimizes at the end
        self.roots: list[str] = []  # what this run named: the only place it may prune
        self.pending_at_start = 0  # chunks an earlier run left without a vector
        self.pending_drained = False  # ...and this run embedded all of them
        self.pending_written = 0  # rows this run stored without a vector
        self._table_ids: set[str] | None = None
        self._ocr_missing: bool | None = None

    def stored_ids(self) -> set[str]:
        """Ids of the documents in the table (one column scan, once a run)."""
        if self._table_ids is None:
            coll = self.coll
            self._table_ids = coll.document_ids() if coll is not None and coll.count() else set()
        return self._table_ids

    def table_has(self, document_id: str) -> bool:
        return document_id in self.stored_ids()

    def note_stored(self, document_ids: Iterable[str]) -> None:
        """Documents a commit just stored rows for (once the ids were scanned)."""
        if self._table_ids is not None:
            self._table_ids.update(document_ids)

    def count(self, record: Event) -> Event:
        """Count a `document` event in the summary; returns it."""
        return self.summary.count(record)

    def entry(
        self,
        f: FoundFile,
        sha: str,
        document_id: str,
        doc_type: str | None,
        chunks: int,
        status: str,
        error: str | None = None,
    ) -> mf.Entry:
        """The manifest entry recording `f` as this run saw it."""
        return mf.Entry(
            path=f.path,
            document_id=document_id,
            size=f.size,
            mtime_ns=f.mtime_ns,
            sha256=sha,
            type=doc_type,
            chunks=chunks,
            status=status,
            options=options_key(self.opts, doc_type),
            ingested_at=now_iso(),
            error=error,
            skip=self.skip_reason(f.path) if status == mf.SKIPPED else None,
        )

    def skip_reason(self, path: str) -> str | None:
        """Why a file skipped in this run may be read later though unchanged: a picture
        OCR could not read in this run (`--ocr never`, or no Tesseract; parse_image skips
        it for those before looking at it). None: it stays skipped while unchanged (a
        binary, a damaged picture, one without text)."""
        from localgpt_cli.rag.filetypes import detect_type

        kind = detect_type(Path(path))
        if kind is None or kind[0] != "image":
            return None
        if self.opts.ocr.mode == "never":
            return mf.OCR_OFF
        return mf.OCR_UNAVAILABLE if self.ocr_missing() else None

    def ocr_missing(self) -> bool:
        """Whether Tesseract is missing in this run (looked for once, on PATH)."""
        if self._ocr_missing is None:
            from localgpt_cli.rag.parse.ocr import missing

            self._ocr_missing = missing() is not None
        return self._ocr_missing

    def check_down(self) -> Iterator[Event]:
        """Warn once, when the embedding server is first found unreachable."""
        if self.queue.down is not None and self.down is None:
            self.down = self.queue.down
            yield {
                "type": "warning",
                "code": "embeddings_pending",
                "message": f"{self.down} Chunks are stored without embeddings (keyword "
                "search finds them); the next ingest embeds them.",
            }


def now_iso() -> str:
    """When a manifest entry was written: UTC, to the second (`docs list` shows it).
    Formatted once a second, not once an entry: 4% of the ingest process's work with
    workers parsing (20,000 entries on the 200 MB corpus)."""
    second = int(time.time())  # the clock datetime.now reads, truncated as isoformat does
    if _NOW[0] != second:
        stamp = datetime.fromtimestamp(second, timezone.utc).isoformat(timespec="seconds")
        _NOW[:] = [second, stamp.replace("+00:00", "Z")]
    return str(_NOW[1])


_NOW: list[int | str] = [-1, ""]  # (second, its timestamp) last formatted
