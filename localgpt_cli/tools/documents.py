"""The `search_documents` tool: the knowledge base as a tool the model can query itself.

Retrieval before the call fills the context with what the user's words match; this tool
lets the model search again with its own words when that was not enough. Excerpts carry
`[Source: …]` labels in the same form as retrieved context, so citations look alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from localgpt_cli.rag.types import Hit, citation
from localgpt_cli.tools.base import Tool, ToolError

SearchFn = Callable[[str, int, "str | None"], Sequence[Hit]]
MAX_K = 20
MAX_EXCERPT_CHARS = 4_000


def format_hits(query: str, hits: Sequence[Hit], collection: str | None) -> str:
    """The text the model reads: one labelled excerpt per hit, best first."""
    where = f" in collection {collection!r}" if collection else ""
    if not hits:
        return f"No passages{where} match {query!r}."
    blocks = [f"{len(hits)} passage(s){where} for {query!r}:"]
    for hit in hits:
        text = hit.text.strip()
        if len(text) > MAX_EXCERPT_CHARS:
            text = (
                text[:MAX_EXCERPT_CHARS]
                + f"\n[… truncated: showed {MAX_EXCERPT_CHARS} of {len(hit.text)} characters]"
            )
        blocks.append(f"{citation(hit.path, hit.chunk, hit.page)}\n{text}")
    return "\n\n".join(blocks)


def search_documents_tool(search: SearchFn, default_k: int = 5) -> Tool:
    """`search_documents` over the callable the session gives (query, k, collection)."""

    def run(args: dict[str, Any]) -> str:
        query = args["query"].strip()
        if not query:
            raise ToolError("the query is empty: say what to look for")
        collection = args.get("collection")
        hits = search(query, args.get("k", default_k), collection)
        return format_hits(query, hits, collection)

    return Tool(
        name="search_documents",
        description=(
            "Search the user's own documents (the local knowledge base) and return the "
            "most relevant excerpts with [Source: path, chunk N] labels. Use it for "
            "questions about the user's notes, files, reports or projects; cite the "
            f"sources you use. Returns k excerpts (default {default_k})."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for, in words"},
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_K,
                    "default": default_k,
                    "description": f"number of excerpts (default {default_k}, at most {MAX_K})",
                },
                "collection": {
                    "type": "string",
                    "description": "collection to search (default: the current one)",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=run,
        examples=(
            "what do my notes say about the VPN setup?",
            "find the section on budgets in my documents",
            "according to the report, what were the Q3 results?",
        ),
        core=True,
        group="knowledge",
        reads_local=True,
    )
