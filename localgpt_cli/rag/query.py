"""Querying a collection: the one path that `search`, chat retrieval, the
`search_documents` tool and `eval` take into the knowledge base.

One function embeds the query with the collection's own model (and its query prefix),
falls back to keyword search with a warning when Ollama cannot embed, and runs the
search, so every way of asking the knowledge base behaves the same. Opening the
collection from the settings is the caller's job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder
    from localgpt_cli.rag.fusion import Dropped
    from localgpt_cli.rag.retrieve import SearchResult
    from localgpt_cli.rag.store import Collection
    from localgpt_cli.rag.types import Hit, Judge

Warn = Callable[[str, str], None]


def collection_may_exist(db_uri: str, name: str) -> bool:
    """False when a local database has no such table: no need to import lancedb at all.

    Importing lancedb costs about a second, so a chat with no knowledge base must not
    pay it just to learn there is nothing to retrieve. Remote URIs are asked.
    """
    from localgpt_cli.rag.store.uri import local_path

    root = local_path(db_uri)
    if root is None:
        return True
    return (root / f"{name}.lance").exists()


class QueryTarget:
    """An open collection, the model its queries are embedded with, and whether that
    model still answers: what every query of one command shares."""

    def __init__(self, collection: Collection, model: str, client: Embedder,
                 judge: Judge | None = None) -> None:  # fmt: skip
        self.collection = collection
        self.model = model
        self.client = client  # embeds the queries
        self.judge = judge  # a provider's reranker over the first candidates (judge.py)
        self.failed = False

    def embed(self, texts: Sequence[str], warn: Warn | None = None) -> list[Any]:
        """Query vectors, or None for each once embedding has failed (reported once)."""
        from localgpt_cli.errors import LocalGPTError
        from localgpt_cli.rag.embedding import embed_queries

        if self.failed:
            return [None] * len(texts)
        try:
            return list(embed_queries(self.client, self.model, list(texts)))
        except LocalGPTError as exc:  # any embedding failure: keyword search still answers
            self.failed = True
            if warn is not None:
                warn(exc.code, f"cannot embed the query: {exc}")
            return [None] * len(texts)


def resolve_threshold(target: QueryTarget, threshold: float | None) -> float:
    """The user's --threshold, else the default for the collection's embedding model."""
    from localgpt_cli.rag.retrieve import default_threshold

    return default_threshold(target.model) if threshold is None else threshold


def query_many(
    target: QueryTarget,
    queries: Sequence[str],
    *,
    k: int,
    mode: str = "hybrid",
    threshold: float | None = None,
    doc_type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    warn: Warn | None = None,
    batch_size: int = 64,
    rerank: str = "local",
    theta: float | None = None,
) -> Iterator[SearchResult]:
    """`SearchResult`s for many queries, in order, over one open table.

    Queries are embedded `batch_size` to a request, then searched `batch_size` at a time
    by one searcher, which reads the collection's state once (asking LanceDB whether the
    table has vectors costs a scan: once per batch was a second per 200 queries). Once
    embedding fails, the rest go by keywords without asking Ollama again (`warn` is told
    once). `document_id` is a full id (the caller resolves a prefix). The fast path runs
    too: the local reranker (`rerank="none"` skips it) and the gate when `theta` is given.
    """
    from localgpt_cli.rag.gate import scale_for
    from localgpt_cli.rag.retrieve import search_many

    limit = resolve_threshold(target, threshold)
    embed = mode != "keyword" and target.collection.has_vectors()
    vectors: list[Any] = []
    for start in range(0, len(queries), max(1, batch_size)):
        batch = list(queries[start : start + batch_size])
        vectors += target.embed(batch, warn) if embed else [None] * len(batch)
    yield from search_many(
        target.collection, list(zip(queries, vectors, strict=True)), k=k, mode=mode,
        threshold=limit, type=doc_type, path_glob=path_glob, document_id=document_id,
        batch_size=batch_size, rerank=rerank, theta=theta,
        gate_scale=scale_for(target.model, limit), judge=target.judge,
    )  # fmt: skip


def source_result(hit: Hit) -> dict[str, Any]:
    """A hit as one entry of the `sources` packet."""
    out = {"rank": hit.rank, "score": round(hit.score, 6), "document_id": hit.document_id,
           "path": hit.path, "chunk": hit.chunk, "text": hit.text}
    if hit.page is not None:
        out["page"] = hit.page
    if "scores" in hit.extra:
        out["scores"] = hit.extra["scores"]
    if hit.ocr_confidence is not None:  # read by OCR: says so, and how sure it was
        out.update(ocr=True, ocr_confidence=hit.ocr_confidence)
    return out


def dropped_result(dropped: Dropped) -> dict[str, Any]:
    """A hit cut from the top k as one `dropped` entry of `sources`: where it was dropped
    (`stage`: threshold, rerank, gate), why (`reason`) and its score at each stage."""
    return {"path": dropped.path, "chunk": dropped.chunk, "score": round(dropped.score, 6),
            "reason": dropped.reason, "document_id": dropped.document_id,
            "stage": dropped.stage, "scores": dropped.scores}
