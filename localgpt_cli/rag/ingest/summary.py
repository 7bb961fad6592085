"""The counts and timings of one ingest run, and the `summary` event they end it with."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# What a run yields: plain dicts (see the package docstring for the kinds).
Event = dict[str, Any]

# `document` event statuses, each counted in the summary field of the same name.
_COUNTED = ("added", "updated", "failed", "removed", "skipped", "moved")


@dataclass
class Summary:
    """Counts of one run; `record()` is the `summary` record of the README's output
    contract."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    moved: int = 0
    removed: int = 0
    failed: int = 0
    skipped: int = 0
    pending_embeddings: int = 0
    chunks: int = 0
    embedded: int = 0
    reused: int = 0
    embed_requests: int = 0
    bytes: int = 0
    dry_run: bool = False
    ms: int = 0
    embed_ms: int = 0  # waiting for the embedding server
    optimize_ms: int = 0  # compaction and index upkeep at the end
    embedder: str = ""  # the embedding model the run used (the collection's own)
    fallback: bool = False  # ...the in-process one, because no Ollama was reachable

    def count(self, record: Event) -> Event:
        """Count a `document` event by its status as it is yielded, so that every file
        reported is counted once; returns it."""
        status = record["status"]
        if status in _COUNTED:
            setattr(self, status, getattr(self, status) + 1)
        return record

    def record(self) -> Event:
        return {
            "type": "summary",
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": self.failed,
            "pending_embeddings": self.pending_embeddings,
            "ms": self.ms,
            "moved": self.moved,
            "skipped": self.skipped,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "reused": self.reused,
            "embed_requests": self.embed_requests,
            "bytes": self.bytes,
            "dry_run": self.dry_run,
            "embed_ms": self.embed_ms,
            "optimize_ms": self.optimize_ms,
            "embedder": self.embedder,
            "fallback": self.fallback,
        }


def elapsed_ms(start: float) -> int:
    """Milliseconds since `start` (a `time.perf_counter()` reading)."""
    return round((time.perf_counter() - start) * 1000)
