"""A set of text hashes (hex sha256) held as 64-bit keys: the embedding cache's index.

Ingest asks, for every chunk of a run, whether its embedding input is stored with a
vector already (`embedding.EmbedQueue.cached`). As a Python set of hex strings that took
~150 bytes a chunk (70 MB at the 200 MB corpus's 460,000 chunks), held to the end of the
run; and the strings, spread through the interpreter's small-object arenas among the
run's short-lived objects, kept those arenas from going back to the system when the set
was dropped, so the memory stayed under the vector-index build's peak. Here a hash costs
8 bytes in a sorted NumPy array (plus a small set of the latest, merged in batches).

Two hashes with the same first 64 bits would read as one: the lookup that follows asks
the store for the full hash, finds no vector for the newcomer, and it is embedded as if
unknown. Nothing is lost by a false "known"; at a million chunks one is a 1-in-10^7 event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

# Keys gathered in a set before they are merged into the sorted array.
MERGE = 1 << 16


def key(text_hash: str) -> int:
    """The 64-bit key of a hash: its first 16 hex digits (a hash that is not hex, which
    ingest never writes, is keyed by its own digest)."""
    try:
        return int(text_hash[:16], 16)
    except ValueError:
        return int.from_bytes(hashlib.sha256(text_hash.encode()).digest()[:8], "big")


class KnownHashes:
    """Membership of text hashes, 8 bytes each."""

    def __init__(self, hashes: Iterable[str] = ()) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()
        self.update(hashes)

    def update(self, hashes: Iterable[str]) -> None:
        """Add hashes (an iterable of any length: merged every MERGE keys)."""
        for text_hash in hashes:
            self._recent.add(key(text_hash))
            if len(self._recent) >= MERGE:
                self._merge()

    def _merge(self) -> None:
        recent = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
        self._sorted = np.union1d(self._sorted, recent)
        self._recent.clear()

    def __contains__(self, text_hash: object) -> bool:
        if not isinstance(text_hash, str):
            return False
        k = key(text_hash)
        if k in self._recent:
            return True
        at = int(np.searchsorted(self._sorted, np.uint64(k)))
        return at < len(self._sorted) and int(self._sorted[at]) == k

    def among(self, hashes: Iterable[str]) -> list[str]:
        """Those of `hashes` held, each once: a document's chunks asked in one NumPy
        search rather than one each."""
        unique = list(dict.fromkeys(hashes))
        keys = [key(h) for h in unique]
        held = self._sorted
        if len(held):
            wanted = np.fromiter(keys, dtype=np.uint64, count=len(keys))
            at = np.minimum(np.searchsorted(held, wanted), len(held) - 1)
            found = (held[at] == wanted).tolist()
        else:
            found = [False] * len(keys)
        recent = self._recent
        return [h for h, k, f in zip(unique, keys, found, strict=True) if f or k in recent]

    def __bool__(self) -> bool:
        return bool(self._recent) or len(self._sorted) > 0
