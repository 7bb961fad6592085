"""The registry: every tool a turn may use, from built-ins, plugins and functions files.

Tools meet here from three places with different trust: built-ins (ours), plugins
(installed packages, entry point group `localgpt.tools`) and `--functions` files (named
by the user on this command line). A broken plugin must not stop the CLI, so it becomes
a warning; a broken functions file is the user's explicit input, so it is a UsageError.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from localgpt_cli.errors import NotFound, UsageError
from localgpt_cli.tools.base import Tool, ToolError
from localgpt_cli.tools.calculator import calculator_tool
from localgpt_cli.tools.denylist import DenyList
from localgpt_cli.tools.documents import SearchFn, search_documents_tool
from localgpt_cli.tools.files import DEFAULT_MAX_CHARS, Warn, file_tools
from localgpt_cli.tools.functions import load_functions_file
from localgpt_cli.tools.picture_read import OcrFn
from localgpt_cli.tools.preview import preview_tools
from localgpt_cli.tools.web import WebFetchFn, WebSearchFn, web_tools

PLUGIN_GROUP = "localgpt.tools"


class Registry:
    """Tools by name, in the order they were added (built-ins first)."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Add a tool; a name already taken is a UsageError naming both sources."""
        taken = self._tools.get(tool.name)
        if taken is not None:
            raise UsageError(
                f"Tool name {tool.name!r} from {tool.source} is already taken by {taken.source}.",
                hint="Rename one of them.",
            )
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None (the loop reports unknown names to the model)."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise NotFound(
                f"No tool named {name!r}.", hint=f"Known tools: {', '.join(self._tools)}."
            )
        return tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def groups(self) -> list[str]:
        """The groups of these tools, in order of first appearance."""
        return list(dict.fromkeys(t.group for t in self._tools.values()))

    def only(self, names: Sequence[str]) -> Registry:
        """The registry restricted to `names` (`-T/--tool NAME`); unknown names fail."""
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            raise UsageError(
                f"Unknown tool(s): {', '.join(unknown)}.",
                hint=f"Known tools: {', '.join(self._tools)} (see `localgpt tools list`).",
            )
        return Registry(self._tools[n] for n in dict.fromkeys(names))

    def to_ollama(self, tools: Iterable[Tool] | None = None) -> list[dict[str, Any]]:
        """Ollama tool definitions for `tools` (default: all of them)."""
        return [t.to_ollama() for t in (self if tools is None else tools)]


@dataclass
class ToolContext:
    """What the built-in tools need from the session that offers them.

    `file_roots` are added to the current directory (unless `include_cwd` is False) as
    the folders read_file/list_directory may see, typically the ingested collection's
    roots. `deny` is the secrets rules (built-in ones when None), `warn` where a redacted
    secret is reported. `search` is the knowledge base as (query, k, collection) -> hits; without it
    there is no search_documents, and `no_search` says why (`tools list` shows it). The
    web tools need both callables and an API key.
    """

    file_roots: Sequence[Path | str] = ()
    include_cwd: bool = True
    cwd: Path | None = None
    read_max_chars: int = DEFAULT_MAX_CHARS
    deny: DenyList | None = None
    warn: Warn | None = None
    search: SearchFn | None = None
    no_search: str = "there is no knowledge base (add documents with `localgpt ingest PATH`)"
    search_k: int = 5
    ollama_api_key_set: bool = field(default_factory=lambda: bool(os.environ.get("OLLAMA_API_KEY")))
    web_search: WebSearchFn | None = None
    web_fetch: WebFetchFn | None = None
    ocr: OcrFn | None = None  # read_file: a picture's text for a model that cannot see

    def read_roots(self) -> list[Path]:
        """The folders read_file, list_directory and propose_edit may touch; `localgpt
        apply` checks an edit's file against the same list."""
        roots = [Path(root) for root in self.file_roots]
        return [self.cwd or Path.cwd(), *roots] if self.include_cwd else roots


def _refusing(why: str) -> Callable[..., NoReturn]:
    """The backend of a built-in this context cannot support: every call says why."""

    def refuse(*args: Any) -> NoReturn:
        raise ToolError(f"unavailable: {why}")

    return refuse


def builtin_listing(context: ToolContext) -> list[tuple[Tool, str | None]]:
    """Every built-in, core ones first, with None or why this context cannot offer it.

    `localgpt tools list` shows them all, so a tool a chat will not offer (no knowledge
    base, no API key) is explained instead of silently missing.
    """
    cwd = context.cwd or Path.cwd()
    roots = context.read_roots()
    listing: list[tuple[Tool, str | None]] = [
        (tool, None)
        for tool in (calculator_tool(),
                     *file_tools(roots, cwd, context.read_max_chars, context.deny, context.warn,
                                 context.ocr))
    ]
    if context.search is not None:
        listing.append((search_documents_tool(context.search, context.search_k), None))
    else:
        refuse = _refusing(context.no_search)
        listing.append((search_documents_tool(refuse, context.search_k), context.no_search))
    if context.ollama_api_key_set and context.web_search and context.web_fetch:
        listing.extend((tool, None) for tool in web_tools(context.web_search, context.web_fetch))
    else:
        why = "needs OLLAMA_API_KEY (Ollama's hosted web search)"
        listing.extend((tool, why) for tool in web_tools(_refusing(why), _refusing(why)))
    listing.extend((tool, None) for tool in preview_tools(roots, cwd, context.deny))
    return listing


def builtin_tools(context: ToolContext) -> list[Tool]:
    """The built-ins this context can support, core ones first."""
    return [tool for tool, why in builtin_listing(context) if why is None]


def builtin_registry(context: ToolContext) -> Registry:
    return Registry(builtin_tools(context))


def _plugin_tools(obj: Any, label: str) -> list[Tool]:
    """Whatever an entry point gave (a Tool, a list, or a factory of either) as Tools."""
    if callable(obj) and not isinstance(obj, Tool):
        obj = obj()
    items = [obj] if isinstance(obj, Tool) else obj
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"returned {type(obj).__name__}, not a Tool or a list of Tools")
    tools = []
    for item in items:
        if not isinstance(item, Tool):
            raise TypeError(f"returned {type(item).__name__} in its list, not a Tool")
        tools.append(dataclasses.replace(item, source=label))
    return tools


def load_plugins(group: str = PLUGIN_GROUP) -> tuple[list[Tool], list[str]]:
    """Tools from installed entry points, and one warning per plugin that failed."""
    import importlib.metadata  # ~30 ms: only when plugins are wanted

    tools: list[Tool] = []
    warnings: list[str] = []
    for ep in importlib.metadata.entry_points(group=group):
        label = f"plugin:{ep.name}"
        try:
            tools.extend(_plugin_tools(ep.load(), label))
        except Exception as exc:
            warnings.append(
                f"Tool plugin {ep.name!r} ({ep.value}) was skipped: {type(exc).__name__}: {exc}"
            )
    return tools, warnings


def build_registry(
    context: ToolContext,
    *,
    plugins: bool = True,
    functions_files: Sequence[str | Path] = (),
) -> tuple[Registry, list[str]]:
    """Built-ins, then plugins, then functions files; returns warnings for stderr.

    A plugin whose name clashes with an earlier tool is skipped with a warning; a clash
    in a functions file is the user's to fix, so it raises UsageError.
    """
    registry = builtin_registry(context)
    warnings: list[str] = []
    if plugins:
        found, warnings = load_plugins()
        for tool in found:
            try:
                registry.add(tool)
            except UsageError as exc:
                warnings.append(f"{exc} The plugin's tool was skipped.")
    for path in functions_files:
        for tool in load_functions_file(path):
            registry.add(tool)
    return registry, warnings
