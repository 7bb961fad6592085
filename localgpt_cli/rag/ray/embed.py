"""The Ray engine's second stage: an actor pool, one embedder per actor.

Each actor builds its embedder the way the CLI does (`App.embedder`, through the callable
cli/ingest.py binds), from the driver's command-line flags and its own node's settings:
a `local:` model runs in the actor's process; any other model goes to the Ollama of the
node's environment (`OLLAMA_HOST` as the node's `ray start` was given it, else its config
file, else localhost:11434: the node's own Ollama), unless the driver was given `--host`,
which every node then uses. Vectors already stored for the same input are reused, as in
the plain engine (`rag/embedding.py`'s `EmbedQueue`, which each actor keeps for the run),
by reading the collection itself (a folder every node mounts, or the object store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from localgpt_cli.rag.ray.parse import doc_table

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from localgpt_cli.llm.provider import Embedder


@dataclass(frozen=True)
class EmbedSpec:
    """What every actor needs to embed like the driver (picklable)."""

    client: Callable[[], Embedder]  # builds the node's embedder (cli/ingest.py binds it)
    model: str
    store: str
    collection: str
    batch_size: int
    embed: bool  # False: the driver found the server down; rows are stored pending


def bound(spec: EmbedSpec) -> type:
    """`Embed` with `spec` built in: an actor with constructor arguments makes Ray log an
    error line on the driver's stderr (they are kept in its object store for restarts)."""

    class BoundEmbed(Embed):
        def __init__(self) -> None:
            super().__init__(spec)

    return BoundEmbed


class Embed:
    """One actor of the pool: `__call__` embeds the chunks of a block's documents."""

    def __init__(self, spec: EmbedSpec) -> None:
        self.spec = spec
        self._queue: Any = None

    def _open(self) -> Any:
        """The embedding queue, opened on the first block (model load, cache scan)."""
        if self._queue is None:
            from localgpt_cli.llm.provider import EmbedStats
            from localgpt_cli.rag.embedding import EmbedQueue
            from localgpt_cli.rag.store import open_store

            spec = self.spec
            client = spec.client()
            store = open_store(spec.store)
            coll = store.collection(spec.collection) if store.exists(spec.collection) else None
            cache = coll if coll is not None and coll.has_vector_column() else None
            self._queue = EmbedQueue(
                client, spec.model, cache, batch_size=spec.batch_size, stats=EmbedStats()
            )
        return self._queue

    def __call__(self, batch: pa.Table) -> pa.Table:
        """The block's documents with their vectors: inputs sent in full batches across
        the block's documents (cached ones reused), the counts in the first row's stats."""
        from localgpt_cli.errors import LocalGPTError

        rows = batch.to_pylist()
        try:
            return self._embed(rows)
        except LocalGPTError as exc:  # this node's embedder failed: its files fail alone
            for row in rows:
                info = orjson.loads(row["info"])
                if info["outcome"] == "ok":
                    info.update(outcome="failed", code=exc.code, message=str(exc))
                    row["info"] = orjson.dumps(info).decode()
            return doc_table(rows)

    def _embed(self, rows: list[dict[str, Any]]) -> pa.Table:
        queue = self._open()
        before = (queue.stats.requests, queue.stats.seconds, queue.embedded)
        docs = [_Document(row) for row in rows if row["chunks"] is not None]
        for doc in docs:
            doc.queue(queue, self.spec.embed)
        if self.spec.embed:
            for (doc, i), vector in queue.drain(everything=True):
                doc.vectors[i] = vector
        for doc in docs:
            doc.finish()
        if rows:
            after = (queue.stats.requests, queue.stats.seconds, queue.embedded)
            delta = [b - a for a, b in zip(before, after, strict=True)]
            down = str(queue.down) if queue.down is not None else None
            stats = {"requests": delta[0], "seconds": delta[1], "embedded": delta[2]}
            rows[0]["stats"] = orjson.dumps({**stats, "down": down}).decode()
        return doc_table(rows)


class _Document:
    """One document's row while its chunks are embedded."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        payload = orjson.loads(row["chunks"])
        self.hashes: list[str] = payload["columns"]["text_hash"]
        self.bodies: list[str] = payload["bodies"]
        self.info = orjson.loads(row["info"])
        self.vectors: list[Any] = [None] * len(self.hashes)

    def queue(self, queue: Any, embed: bool) -> None:
        """Take the vectors the cache has, queue the other inputs."""
        cached = queue.cached(self.hashes) if embed else {}
        truncated = 0
        for i, (body, h) in enumerate(zip(self.bodies, self.hashes, strict=True)):
            if h in cached:
                self.vectors[i] = cached[h]
            elif embed:
                truncated += queue.put(body, h, (self, i))
        self.info.update(reused=sum(h in cached for h in self.hashes), truncated=truncated)

    def finish(self) -> None:
        """The vectors as float32 bytes (zeros where missing, listed in the info)."""
        import numpy as np

        present = [v for v in self.vectors if v is not None]
        if present:
            flat = np.zeros((len(self.vectors), len(present[0])), dtype=np.float32)
            for i, v in enumerate(self.vectors):
                if v is not None:
                    flat[i] = v
            self.row["vectors"] = flat.tobytes()
            self.info["dim"] = flat.shape[1]
        self.info["missing"] = [i for i, v in enumerate(self.vectors) if v is None]
        self.row["info"] = orjson.dumps(self.info).decode()
