"""Querying the knowledge base from a command: `search`, chat retrieval, the
`search_documents` tool.

One function embeds the query with the collection's own model (and its query prefix),
falls back to keyword search with a warning when Ollama cannot embed, and runs the
search, so every way of asking the knowledge base behaves the same.
"""

from __future__ import annotations

from collections.abc import Callable
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
    from localgpt_cli.cli.kb import model_explicit, open_store
    from localgpt_cli.errors import LocalGPTError
    from localgpt_cli.rag.embedding import embed_queries
    from localgpt_cli.rag.retrieve import DEFAULT_THRESHOLD, search

    coll = open_store(app).collection(collection or app.settings.collection)
    model = coll.model or app.settings.embed_model
    if model_explicit(app):
        coll.check_model(app.settings.embed_model)
    vector = None
    if mode != "keyword" and coll.has_vectors():
        try:
            vector = embed_queries(app.client, model, [query])[0]
        except LocalGPTError as exc:  # any embedding failure: keyword search still answers
            if warn is not None:
                warn(exc.code, f"cannot embed the query: {exc}")
    result = search(
        coll, query, vector, k=k, mode=mode,
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        type=doc_type, path_glob=path_glob, document_id=document_id,
    )
    return result


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
