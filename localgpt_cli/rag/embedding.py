"""Embedding texts for the knowledge base: model prefixes, input limits, and the cache.

Some embedding models were trained with task prefixes and lose quality without them
(nomic-embed-text wants `search_document: ` on passages and `search_query: ` on queries);
others were trained without and must not get any. The table below is the one place that
knows which is which, so ingest and every query path embed the same way.

A chunk's embedding input is its text with its document's title above it (`titles.embed_body`),
then the model's document prefix. The cache is the collection itself: a chunk whose input
is already stored with a vector (same collection, hence same model; keyed by the hash of the
input, `store.embed_hash`) reuses it, so editing one paragraph of a long document costs one
or two embeddings instead of the whole document, and a changed title re-embeds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import LocalGPTError, OllamaUnreachable

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder, EmbedStats
    from localgpt_cli.rag.store import Collection

# Longest text sent to the embedding model, in characters. Chunks are far shorter by
# default; this guards a huge --chunk-size against the model's context (nomic-embed-text
# reads 2,048 tokens, roughly 8,000 characters of English). The stored text stays whole.
MAX_EMBED_CHARS = 8000

# Model (without tag) -> (document prefix, query prefix), as their model cards prescribe.
_RETRIEVAL_QUERY = "Represent this sentence for searching relevant passages: "
PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
    "mxbai-embed-large": ("", _RETRIEVAL_QUERY),
    "snowflake-arctic-embed": ("", _RETRIEVAL_QUERY),
}


def base_name(model: str) -> str:
    """`nomic-embed-text:v1.5` and `library/nomic-embed-text` -> `nomic-embed-text`."""
    return model.rsplit("/", 1)[-1].split(":", 1)[0].lower()


def prefixes(model: str) -> tuple[str, str]:
    """(document prefix, query prefix) for `model`; none for models not in the table."""
    return PREFIXES.get(base_name(model), ("", ""))


def document_input(model: str, text: str) -> tuple[str, bool]:
    """What is sent to embed a stored chunk (`text` is its `embed_body`: title and chunk
    text), and whether it had to be truncated."""
    return _limit(prefixes(model)[0] + text)


def query_input(model: str, text: str) -> tuple[str, bool]:
    """What is sent to embed a search query, and whether it had to be truncated."""
    return _limit(prefixes(model)[1] + text)


def _limit(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_EMBED_CHARS:
        return text, False
    return text[:MAX_EMBED_CHARS], True


def embed_queries(
    client: Embedder, model: str, texts: Sequence[str], *, batch_size: int = 64
) -> list[list[float]]:
    """Query vectors, with the model's query prefix (the counterpart of ingest)."""
    inputs = [query_input(model, t)[0] for t in texts]
    return client.embed(model, inputs, batch_size=batch_size)


class EmbedQueue:
    """Chunk texts waiting for their embeddings, sent in full batches across documents.

    Requests carry exactly `batch_size` texts until the last one, so a run over many small
    files makes ceil(new texts / batch size) requests, not one or more per file. A text
    already stored with a vector (same collection, hence same model) is reused instead:
    knowing which texts are stored costs one scan of the `text_hash` column, paid only when
    the first text needs a vector (an unchanged re-run never pays it), and vectors are then
    fetched for known hashes only. A text queued twice is sent once. Once the server is
    found unreachable no further request is made: texts come back with None (stored
    pending, embedded by the next run).
    """

    def __init__(
        self,
        client: Embedder,
        model: str,
        collection: Collection | None,
        *,
        batch_size: int,
        stats: EmbedStats,
    ) -> None:
        self.client = client
        self.model = model
        self.collection = collection
        self.batch_size = batch_size
        self.stats = stats
        self.down: LocalGPTError | None = None
        self.embedded = 0
        self._known: set[str] | None = None
        self._queue: dict[str, tuple[str, list[Any]]] = {}  # hash -> (input, refs)

    def remember(self, hashes: Iterable[str]) -> None:
        """Texts just stored with vectors: later chunks may reuse them."""
        if self._known is not None:
            self._known.update(hashes)

    def forget(self) -> None:
        """Drop the set of stored text hashes (~150 bytes a chunk: 70 MB at 460k chunks)
        once no text is left to embed, before the run's memory peak in the index build."""
        self._known = None

    def cached(self, hashes: Sequence[str]) -> dict[str, Any]:
        """Stored vectors (numpy float32) of those of `hashes` the collection has."""
        import numpy as np

        if self.collection is None:
            return {}
        if self._known is None:
            self._known = self.collection.embedded_hashes()
        wanted = [h for h in set(hashes) if h in self._known]
        if not wanted:
            return {}
        found = self.collection.lookup_vectors(wanted)
        return {h: np.asarray(v, dtype=np.float32) for h, v in found.items()}

    def put(self, text: str, text_hash: str, ref: Any) -> bool:
        """Queue `text` (a chunk's `embed_body`, hashed as `text_hash`) for `ref`; True if
        its embed input had to be truncated."""
        queued = self._queue.get(text_hash)
        if queued is not None:
            queued[1].append(ref)
            return False
        sent, cut = document_input(self.model, text)
        self._queue[text_hash] = (sent, [ref])
        return cut

    def drain(self, everything: bool = False) -> list[tuple[Any, Any]]:
        """Send full batches (and the rest too if `everything`); (ref, vector or None)."""
        import numpy as np

        out: list[tuple[Any, Any]] = []
        while self._queue and (everything or len(self._queue) >= self.batch_size):
            keys = list(itertools.islice(self._queue, self.batch_size))
            items = [self._queue.pop(k) for k in keys]
            rows: Any = None
            if self.down is None:
                try:
                    got = self.client.embed(
                        self.model,
                        [sent for sent, _ in items],
                        batch_size=self.batch_size,
                        stats=self.stats,
                    )
                except OllamaUnreachable as exc:
                    self.down = exc
                else:
                    rows = np.asarray(got, dtype=np.float32)
                    self.embedded += len(items)
            for i, (_, refs) in enumerate(items):
                vector = rows[i] if rows is not None else None
                out.extend((ref, vector) for ref in refs)
        return out
