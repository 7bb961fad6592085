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
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from localgpt_cli import threads
from localgpt_cli.errors import LocalGPTError, OllamaUnreachable

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder, EmbedStats
    from localgpt_cli.rag.hashkeys import KnownHashes
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

    With `concurrency` above 1, once a first request has come back (the server is there,
    the model known) full batches are sent on threads and the run goes on parsing: up to
    `concurrency` requests are in flight, and a further batch waits for the oldest, so
    what waits in memory stays bounded. A server with a GPU then never idles while the CPU
    parses. `stats.seconds` counts only the time the run waited for vectors.
    """

    def __init__(
        self,
        client: Embedder,
        model: str,
        collection: Collection | None,
        *,
        batch_size: int,
        stats: EmbedStats,
        concurrency: int = 1,
    ) -> None:
        self.client = client
        self.concurrency = concurrency
        self._flight: deque[tuple[list[tuple[str, list[Any]]], Future[Any]]] = deque()
        self._answered = False  # a request came back: later ones may go on threads
        self.model = model
        self.collection = collection
        self.batch_size = batch_size
        self.stats = stats
        self.down: LocalGPTError | None = None
        self.embedded = 0
        self._known: KnownHashes | None = None  # stored with a vector (8 bytes each)
        self._queue: dict[str, tuple[str, list[Any]]] = {}  # hash -> (input, refs)
        self._prefix = prefixes(model)[0]  # what is sent: the prefix, then the text
        # Called before the cache reads the collection (ingest: a commit may be in flight).
        self.before_lookup: Callable[[], None] = _nothing

    def remember(self, hashes: Iterable[str]) -> None:
        """Texts just stored with vectors: later chunks may reuse them."""
        if self._known is not None:
            self._known.update(hashes)

    def forget(self) -> None:
        """Drop the stored text hashes once no text is left to embed, before the run's
        memory peak in the index build."""
        self._known = None

    def cached(self, hashes: Sequence[str]) -> dict[str, Any]:
        """Stored vectors (numpy float32) of those of `hashes` the collection has."""
        import numpy as np

        if self.collection is None:
            return {}
        if self._known is None:
            self.before_lookup()
            self._known = self.collection.embedded_hashes()
        if not self._known:  # a new collection: nothing to reuse yet
            return {}
        wanted = self._known.among(hashes)
        if not wanted:
            return {}
        self.before_lookup()
        found = self.collection.lookup_vectors(wanted)
        return {h: np.asarray(v, dtype=np.float32) for h, v in found.items()}

    def put(self, text: str, text_hash: str, ref: Any) -> bool:
        """Queue `text` (a chunk's `embed_body`, hashed as `text_hash`) for `ref`; True if
        its embed input had to be truncated."""
        queued = self._queue.get(text_hash)
        if queued is not None:
            queued[1].append(ref)
            return False
        sent, cut = _limit(self._prefix + text)
        self._queue[text_hash] = (sent, [ref])
        return cut

    def cuts(self, length: int) -> bool:
        """Whether an input of `length` characters is cut to the embed limit when sent
        with the model's document prefix, told without building it."""
        return len(self._prefix) + length > MAX_EMBED_CHARS

    def drain(self, everything: bool = False) -> list[tuple[Any, Any]]:
        """Send full batches (and the rest too if `everything`); (ref, vector or None)
        of the requests that have come back (all of them if `everything`)."""
        out: list[tuple[Any, Any]] = []
        # Once the server is down nothing is sent: what waits comes back at once, None.
        everything = everything or self.down is not None
        while self._queue and (everything or len(self._queue) >= self.batch_size):
            keys = list(itertools.islice(self._queue, self.batch_size))
            items = [self._queue.pop(k) for k in keys]
            texts = [sent for sent, _ in items]
            if self.down is not None:
                out.extend(self._vectors(items, None))
            elif self.concurrency <= 1 or not self._answered:
                out.extend(self._vectors(items, self._send(texts)))
            else:
                while len(self._flight) >= self.concurrency:
                    out.extend(self._land())
                # A daemon thread: a request to a server that hangs must not keep the
                # process from exiting on Ctrl-C (an executor's threads are joined).
                request = threads.start(partial(self._request, texts), "embed-request")
                self._flight.append((items, request))
        while self._flight and (everything or self._flight[0][1].done()):
            out.extend(self._land())
        return out

    def _send(self, texts: list[str]) -> Any:
        """One request, waited for here: the vectors, or None once the server is down."""
        try:
            got = self.client.embed(
                self.model, texts, batch_size=self.batch_size, stats=self.stats
            )
        except OllamaUnreachable as exc:
            self.down = exc
            return None
        self._answered = True
        return got

    def _request(self, texts: list[str]) -> tuple[Any, EmbedStats]:
        """One request on a thread, with its own counts (merged by `_land`)."""
        from localgpt_cli.llm.provider import EmbedStats

        stats = EmbedStats()
        got = self.client.embed(self.model, texts, batch_size=self.batch_size, stats=stats)
        return got, stats

    def _land(self) -> list[tuple[Any, Any]]:
        """Wait for the oldest request in flight; its (ref, vector) pairs. An error other
        than an unreachable server is raised here, as if the request had been made here."""
        items, future = self._flight.popleft()
        started = time.perf_counter()
        try:
            got, stats = future.result()
        except OllamaUnreachable as exc:
            self.down = self.down or exc
            got = None
        else:
            self.stats.requests += stats.requests
            self.stats.inputs += stats.inputs
            self.stats.retries += stats.retries
        finally:
            self.stats.seconds += time.perf_counter() - started
        return self._vectors(items, got)

    def _vectors(self, items: list[tuple[str, list[Any]]], got: Any) -> list[tuple[Any, Any]]:
        import numpy as np

        rows = np.asarray(got, dtype=np.float32) if got is not None else None
        if rows is not None:
            self.embedded += len(items)
        out: list[tuple[Any, Any]] = []
        for i, (_, refs) in enumerate(items):
            vector = rows[i] if rows is not None else None
            out.extend((ref, vector) for ref in refs)
        return out



def _nothing() -> None:
    """No one to wait for before a cache lookup."""
