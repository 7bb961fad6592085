"""`web_search` and `web_fetch`: Ollama's hosted web search, offered with an API key.

The calls go through callables the session passes in (wired to the `ollama` client in
`llm/`), because only `llm/` may import `ollama` and because tests must never reach
https://ollama.com. The callables may return the client's response models or plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from localgpt_cli.tools.base import Tool, ToolError

WebSearchFn = Callable[[str, int], Any]
WebFetchFn = Callable[[str], Any]
MAX_RESULTS = 10
MAX_SNIPPET_CHARS = 1_500
MAX_PAGE_CHARS = 20_000
MAX_LINKS = 20


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def format_search(query: str, response: Any) -> str:
    results = list(_field(response, "results") or [])
    if not results:
        return f"No web results for {query!r}."
    blocks = [f"{len(results)} web result(s) for {query!r}:"]
    for i, item in enumerate(results, 1):
        content = (_field(item, "content") or "").strip()
        if len(content) > MAX_SNIPPET_CHARS:
            content = content[:MAX_SNIPPET_CHARS] + " […]"
        title = _field(item, "title") or "(no title)"
        blocks.append(f"{i}. {title}\n{_field(item, 'url') or ''}\n{content}")
    return "\n\n".join(blocks)


def format_page(url: str, response: Any) -> str:
    title = _field(response, "title") or "(no title)"
    content = (_field(response, "content") or "").strip()
    if len(content) > MAX_PAGE_CHARS:
        content = (
            content[:MAX_PAGE_CHARS]
            + f"\n[… truncated: showed {MAX_PAGE_CHARS} of {len(content)} characters]"
        )
    text = f"{title}\n{url}\n\n{content}"
    links = list(_field(response, "links") or [])
    if links:
        shown = "\n".join(links[:MAX_LINKS])
        more = f"\n[… {len(links) - MAX_LINKS} more links]" if len(links) > MAX_LINKS else ""
        text += f"\n\nLinks:\n{shown}{more}"
    return text


def web_tools(search: WebSearchFn, fetch: WebFetchFn) -> list[Tool]:
    """The two hosted web tools over the session's callables."""
    return [_search_tool(search), _fetch_tool(fetch)]


def _search_tool(search: WebSearchFn) -> Tool:
    def run_search(args: dict[str, Any]) -> str:
        query = args["query"].strip()
        if not query:
            raise ToolError("the query is empty: say what to search for")
        return format_search(query, search(query, args.get("max_results", 5)))

    return Tool(
        name="web_search",
        description=(
            "Search the web for current information (news, prices, recent releases, facts "
            "not in your training data). Returns titles, URLs and snippets "
            "(max_results default 5)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "the search query"},
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "default": 5,
                    "description": f"number of results (default 5, at most {MAX_RESULTS})",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=run_search,
        group="web",
        network=True,
        examples=(
            "what is the latest Python release?",
            "search the web for today's weather in Paris",
            "find recent news about Ollama",
        ),
    )


def _fetch_tool(fetch: WebFetchFn) -> Tool:
    def run_fetch(args: dict[str, Any]) -> str:
        url = args["url"].strip()
        if urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
            raise ToolError(f"{url!r} is not an http(s) URL")
        return format_page(url, fetch(url))

    return Tool(
        name="web_fetch",
        description=(
            "Fetch a web page by URL and return its title, main text and links. Use it "
            "to read a page found with web_search or given by the user."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "an http:// or https:// URL"},
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        handler=run_fetch,
        group="web",
        network=True,
        examples=(
            "open https://ollama.com/blog and summarise it",
            "what does this page say: https://example.com/docs",
        ),
    )
