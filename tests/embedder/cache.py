"""A disk cache of real embedding vectors, keyed by the SHA-256 of model name and text.

Embedding Cranfield's ~4,100 chunks with the NumPy model takes minutes; with this cache a
second benchmark run over the same chunks takes seconds. Layout, under
`<cache_dir>/<model>-<dim>/`: append-only shard files `*.vec`, one per writing embedder
instance (so two processes never append to the same file and need no lock). Each shard is
a run of fixed-size records: 32-byte key digest, CRC-32 of key and vector, then the
float32 vector. A record is appended with one `write` of whole records; a reader takes only
whole records whose CRC checks, so a crash or a concurrent writer leaves at most an
ignored tail, never a wrong vector.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
import zlib
from pathlib import Path
from typing import Any, Protocol

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "embeddings"


class Embedder(Protocol):
    """What the cache wraps: a named model of fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class CachedEmbedder:
    """Serve vectors from disk when the same model has embedded the same text before."""

    def __init__(self, model: Embedder, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> None:
        import numpy as np

        self.model = model
        self.name = model.name
        self.dim = model.dim
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model.name)
        self.directory = Path(cache_dir) / f"{safe}-{model.dim}"
        self.hits = 0
        self.misses = 0
        self._record = np.dtype(
            [("key", "u1", (32,)), ("crc", "<u4"), ("vec", "<f4", (model.dim,))]
        )
        self._vectors: dict[bytes, Any] = {}
        self._read_upto: dict[Path, int] = {}
        self._shard: Path | None = None
        self._lock = threading.Lock()

    def key(self, text: str) -> bytes:
        """The cache key: the model name is in it, so two models never share a vector."""
        return hashlib.sha256(f"{self.name}\0{text}".encode()).digest()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors for `texts`, running the model only on texts not cached yet."""
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: list[str]) -> Any:
        """Like `embed`, as a float32 array of shape (len(texts), dim)."""
        import numpy as np

        keys = [self.key(t) for t in texts]
        with self._lock:
            if any(k not in self._vectors for k in keys):
                self._scan()  # other processes may have embedded these meanwhile
            missing: dict[bytes, str] = {}
            for k, text in zip(keys, texts, strict=True):
                if k not in self._vectors:
                    missing.setdefault(k, text)
            self.misses += len(missing)
            self.hits += len(keys) - len(missing)
            if missing:
                vectors = np.asarray(self.model.embed(list(missing.values())), dtype=np.float32)
                if vectors.shape != (len(missing), self.dim):
                    raise ValueError(
                        f"{self.name} returned shape {vectors.shape}, "
                        f"expected ({len(missing)}, {self.dim})"
                    )
                self._append(list(missing), vectors)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for row, k in enumerate(keys):
                out[row] = self._vectors[k]
        return out

    def __len__(self) -> int:
        with self._lock:
            self._scan()
            return len(self._vectors)

    def _scan(self) -> None:
        """Read the whole records added to any shard since the last scan."""
        import numpy as np

        if not self.directory.is_dir():
            return
        size = self._record.itemsize
        for shard in sorted(self.directory.glob("*.vec")):
            start = self._read_upto.get(shard, 0)
            whole = (shard.stat().st_size - start) // size
            if whole <= 0:
                continue
            with shard.open("rb") as f:
                f.seek(start)
                records = np.frombuffer(f.read(whole * size), dtype=self._record)
            self._read_upto[shard] = start + whole * size
            for record in records:
                body = record["key"].tobytes() + record["vec"].tobytes()
                if zlib.crc32(body) == int(record["crc"]):
                    self._vectors[record["key"].tobytes()] = record["vec"]

    def _append(self, keys: list[bytes], vectors: Any) -> None:
        import numpy as np

        records = np.zeros(len(keys), dtype=self._record)
        records["key"] = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 32)
        records["vec"] = vectors
        for row, k in enumerate(keys):
            records[row]["crc"] = zlib.crc32(k + records[row]["vec"].tobytes())
            self._vectors[k] = records[row]["vec"]
        if self._shard is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._shard = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.vec"
        fd = os.open(self._shard, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = records.tobytes()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        # Our own records are already in memory; do not read them back.
        self._read_upto[self._shard] = self._read_upto.get(self._shard, 0) + len(data)
