"""Querying the knowledge base from a command: `search`, chat retrieval, the
`search_documents` tool.

One function embeds the query with the collection's own model (and its query prefix),
falls back to keyword search with a warning when Ollama cannot embed, and runs the
search, so every way of asking the knowledge base behaves the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from localgpt_cli.cli.app import App


def collection_may_exist(app: App, name: str) -> bool:
    """False when a local database has no such table: no need to import lancedb at all.

    Importing lancedb costs about a second, so a chat with no knowledge base must not
    pay it just to learn there is nothing to retrieve. Remote URIs are asked.
    """
    uri = app.settings.db_uri
    if "://" in uri and not uri.startswith("file://"):
        return True
    root = Path(uri.removeprefix("file://")).expanduser()
    return (root / f"{name}.lance").exists()


def query_collection(
    app: App,
    query: str,
    *,
    k: int,
    mode: str = "hybrid",
    threshold: float | None = None,
    collection: str | None = None,
    doc_type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    warn: Callable[[str, str], None] | None = None,
) -> Any:
    """A `SearchResult` for `query`; an embedding failure is reported to `warn` (with its
    error code) and the search goes on by keywords."""
    results = query_many(
        app, [query], k=k, mode=mode, threshold=threshold, collection=collection,
        doc_type=doc_type, path_glob=path_glob, document_id=document_id, warn=warn,
    )  # fmt: skip
    return next(results)


def query_many(
    app: App,
    queries: Sequence[str],
    *,
    k: int,
    mode: str = "hybrid",
    threshold: float | None = None,
    collection: str | None = None,
    doc_type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    warn: Callable[[str, str], None] | None = None,
    batch_size: int = 64,
) -> Iterator[Any]:
    """`SearchResult`s for many queries, in order, over one open table.

    Queries are embedded `batch_size` to a request, then searched `batch_size` at a time
    by one searcher, which reads the collection's state once (asking LanceDB whether the
    table has vectors costs a scan: once per batch was a second per 200 queries). Once
    embedding fails, the rest go by keywords without asking Ollama again (`warn` is told
    once).
    """
    from localgpt_cli.rag.retrieve import search_many

    target = open_target(app, collection)
    if document_id:  # as `docs list` prints it (12 characters), or any unique prefix
        from localgpt_cli.cli.kb import resolve_document

        document_id = resolve_document(target.collection, document_id)[0]
    limit = resolve_threshold(target, threshold)
    embed = mode != "keyword" and target.collection.has_vectors()
    vectors: list[Any] = []
    for start in range(0, len(queries), max(1, batch_size)):
        batch = list(queries[start : start + batch_size])
        vectors += target.embed(batch, warn) if embed else [None] * len(batch)
    yield from search_many(
        target.collection, list(zip(queries, vectors, strict=True)), k=k, mode=mode,
        threshold=limit, type=doc_type, path_glob=path_glob, document_id=document_id,
        batch_size=batch_size,
    )  # fmt: skip


class QueryTarget:
    """An open collection, the model its queries are embedded with, and whether that
    model still answers: what every query of one command shares."""

    def __init__(self, app: App, collection: Any, model: str) -> None:
        self.app = app
        self.collection = collection
        self.model = model
        self.failed = False

    def embed(
        self, texts: Sequence[str], warn: Callable[[str, str], None] | None = None
    ) -> list[Any]:
        """Query vectors, or None for each once embedding has failed (reported once)."""
        from localgpt_cli.errors import LocalGPTError
        from localgpt_cli.rag.embedding import embed_queries

        if self.failed:
            return [None] * len(texts)
        try:
            return list(embed_queries(self.app.client, self.model, list(texts)))
        except LocalGPTError as exc:  # any embedding failure: keyword search still answers
            self.failed = True
            if warn is not None:
                warn(exc.code, f"cannot embed the query: {exc}")
            return [None] * len(texts)


def open_target(app: App, collection: str | None = None) -> QueryTarget:
    """Open the collection to query, refusing an explicitly chosen model it was not built
    with (its vectors would not be comparable)."""
    from localgpt_cli.cli.kb import chosen_embed_model, model_explicit, open_store

    coll = open_store(app).collection(collection or app.settings.collection)
    model = chosen_embed_model(app)
    if model_explicit(app):
        coll.check_model(model)
    return QueryTarget(app, coll, coll.model or model)


def resolve_threshold(target: QueryTarget, threshold: float | None) -> float:
    """The user's --threshold, else the default for the collection's embedding model."""
    from localgpt_cli.rag.retrieve import default_threshold

    return default_threshold(target.model) if threshold is None else threshold


def source_result(hit: Any) -> dict[str, Any]:
    """A hit as one entry of the `sources` packet."""
    out = {"rank": hit.rank, "score": round(hit.score, 6), "document_id": hit.document_id,
           "path": hit.path, "chunk": hit.chunk, "text": hit.text}
    if hit.page is not None:
        out["page"] = hit.page
    return out


def chat_retriever(app: App, *, k: int, threshold: float | None, collection: str) -> Any:
    """The retriever a chat turn calls with the user's message."""
    from localgpt_cli.kernel.grounding import Retrieved

    def retrieve(query: str) -> Retrieved:
        notes: list[str] = []
        result = query_collection(app, query, k=k, threshold=threshold, collection=collection,
                                  warn=lambda _code, message: notes.append(message))
        return Retrieved(
            query=query,
            mode=result.mode_used,
            results=[source_result(h) for h in result.hits],
            dropped=[{"path": d.path, "chunk": d.chunk, "score": round(d.score, 6),
                      "reason": d.reason} for d in result.dropped],
            warnings=notes + list(result.warnings),
        )

    return retrieve


def tool_search(app: App) -> Any:
    """The knowledge-base search the `search_documents` tool calls: (query, k, coll) -> hits."""

    def run(query: str, k: int, collection: str | None) -> list[Any]:
        return list(query_collection(app, query, k=k, collection=collection).hits)

    return run
