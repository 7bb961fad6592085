"""Builds the tools a `chat` turn may use, shared by `chat` and `localgpt tools`.

The registry is the same for both commands, so `localgpt tools list` shows exactly
what a chat with the same flags would offer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from localgpt_cli.cli.app import App
from localgpt_cli.config import cache_dir
from localgpt_cli.errors import InvalidInput, UsageError, setting_error

SELECTION_LIMIT = 12
SELECTION_TOP_K = 6


def _context(app: App, search: Any, no_search: str | None = None) -> Any:
    """The ToolContext of this command: the client's web calls, the knowledge base search."""
    from localgpt_cli.tools.registry import ToolContext

    client = app.client
    return ToolContext(
        search=search,
        # Ollama's hosted web tools; a provider without them offers none
        web_search=getattr(client, "web_search", None),
        web_fetch=getattr(client, "web_fetch", None),
        ollama_api_key_set=bool(os.environ.get("OLLAMA_API_KEY")),
        no_search=no_search or ToolContext.no_search,
    )


def read_roots() -> list[Any]:
    """The folders a chat started here lets read_file and propose_edit touch (`_context`
    adds no roots to the current folder); `localgpt apply` allows the same, no more."""
    from localgpt_cli.tools.registry import ToolContext

    return ToolContext().read_roots()


def build_registry(app: App, functions: Sequence[str] = (), search: Any = None) -> Any:
    """Built-ins, plugins and --functions files; warnings go to stderr."""
    from localgpt_cli.tools.registry import build_registry

    registry, warnings = build_registry(_context(app, search), functions_files=list(functions))
    for warning in warnings:
        app.output.warn("tool_plugin", warning)
    return registry


def tool_listing(app: App, functions: Sequence[str] = ()) -> list[tuple[Any, str | None]]:
    """Every tool `localgpt tools` shows, with None or why a chat would not offer it.

    The knowledge base is looked at as `chat` does (the collection has documents), so
    `search_documents` is listed either way, with the reason when it is not offered.
    """
    from localgpt_cli.cli.retrieval import knowledge_base, tool_search
    from localgpt_cli.errors import LocalGPTError
    from localgpt_cli.tools.registry import builtin_listing

    name = app.settings.collection
    try:
        has_kb = knowledge_base(app, None)
        no_search = (
            f"the collection {name!r} has no documents (add some with `localgpt ingest PATH`)"
        )
    except LocalGPTError as exc:
        has_kb, no_search = False, f"the knowledge base cannot be opened: {exc}"
    search = tool_search(app) if has_kb else None
    listing = builtin_listing(_context(app, search, no_search))
    registry = build_registry(app, functions, search)
    return listing + [(tool, None) for tool in registry if tool.source != "builtin"]


def chat_groups(
    app: App, flag: str | None, no_tools: bool
) -> tuple[bool, list[str] | None, str]:
    """(tools on, allowed groups or None for all, where they were set) from --no-tools,
    --tools GROUPS, or the `tools.groups` setting (LOCALGPT_TOOLS, [tools] groups)."""
    if no_tools:
        return False, None, "--no-tools"
    value = flag if flag is not None else app.settings.values.get("tools.groups")
    where = "--tools" if flag is not None else app.settings.named("tools.groups")
    return (*parse_groups(value, where), where)


def parse_groups(value: str | None, where: str) -> tuple[bool, list[str] | None]:
    """`all` (or nothing) -> every group, `none` -> tools off, `a,b` -> those groups."""
    from localgpt_cli.tools.base import GROUP_NAME

    text = (value or "all").strip().lower()
    if text in ("all", ""):
        return True, None
    if text == "none":
        return False, None
    names = [g.strip() for g in text.split(",") if g.strip()]
    bad = [g for g in names if not GROUP_NAME.match(g) or g in ("all", "none")]
    if bad or not names:
        raise setting_error(where, f"{where}: {', '.join(map(repr, bad)) or repr(value)} is "
                            "not a list of tool groups.", hint="Use GROUP,GROUP (see `localgpt "
                            "tools list`), `all` or `none`.")
    return True, list(dict.fromkeys(names))


def check_groups(groups: list[str] | None, known: list[str], where: str) -> None:
    """Refuse a group no enabled tool belongs to: a typo must not silently mean no tools."""
    unknown = [g for g in groups or () if g not in known]
    if unknown:
        raise setting_error(where, f"Unknown tool group(s) for {where}: {', '.join(unknown)}.",
                            hint=f"Groups: {', '.join(known)} (see `localgpt tools list`).")


def repl_tools(turns: Any, arg: str) -> str:
    """`/tools` in the REPL: show the allowed groups, or set them for the next turns."""
    toolbox = turns.toolbox
    known = list(dict.fromkeys(t.group for t in toolbox.tools)) if toolbox else []
    if not arg:
        if toolbox is None or toolbox.groups == []:
            return "Tools: none."
        chosen = "all" if toolbox.groups is None else ", ".join(toolbox.groups)
        return f"Tool groups: {chosen} (available: {', '.join(known)})."
    try:
        on, groups = parse_groups(arg, "/tools")
        if toolbox is None and on:
            # Built as the chat would have (-T, --approve, the knowledge base's search),
            # and kept only once the groups are known: a refused /tools changes nothing.
            flags = turns.flags
            toolbox = build_toolbox(turns.app, only=flags.only_tools, functions=flags.functions,
                                    approve=flags.approve, groups=groups, where="/tools",
                                    search=turns.search)
            known = list(dict.fromkeys(t.group for t in toolbox.tools))
        check_groups(groups, known, "/tools")
    except (UsageError, InvalidInput) as exc:
        return str(exc)
    if toolbox is not None:
        toolbox.groups = groups if on else []
        turns.toolbox = toolbox
    return "Tools: none." if not on else f"Tool groups: {arg if groups else 'all'}."


def build_toolbox(
    app: App,
    *,
    only: Sequence[str] = (),
    functions: Sequence[str] = (),
    approve: bool = False,
    search: Any = None,
    groups: list[str] | None = None,
    where: str = "--tools",
) -> Any:
    """The Toolbox for a turn: enabled tools, the allowed groups, selection, approval."""
    from localgpt_cli.kernel.session import Toolbox

    registry = build_registry(app, functions, search)
    check_groups(groups, registry.groups(), where)
    if only:
        unknown = [n for n in only if n not in registry]
        if unknown:
            raise UsageError(
                f"Unknown tool(s) for -T: {', '.join(unknown)}.",
                hint=f"Available: {', '.join(registry.names())}.",
            )
        registry = registry.only(list(only))
    embed_model = app.settings.embed_model

    def select(tools: list[Any], message: str) -> Any:
        from localgpt_cli.tools.selection import select_tools

        return select_tools(
            tools, message,
            embed=lambda texts: app.embedder(model=embed_model).embed(embed_model, texts),
            embed_model=embed_model, cache_dir=cache_dir() / "tools",
            limit=SELECTION_LIMIT, top_k=SELECTION_TOP_K, groups=toolbox.groups,
        )

    toolbox = Toolbox(tools=list(registry), select=select,
                      approve=_terminal_approval() if approve else None, groups=groups)
    return toolbox


def _terminal_approval() -> Any:
    """Ask y/n on the terminal before each tool call (stdin may be a pipe of context)."""
    try:
        # Binary and unbuffered: a terminal is not seekable, which text "r+" requires.
        tty = open("/dev/tty", "r+b", buffering=0)  # noqa: SIM115 - open for the whole chat
    except OSError:
        raise UsageError("--approve needs a terminal to ask on.") from None

    def approve(name: str, arguments: dict[str, Any]) -> bool:
        from localgpt_cli.render.chat import tool_line
        from localgpt_cli.render.terminal import visible

        tty.write(f"Run {visible(tool_line(name, arguments))}? [y/N] ".encode())
        answer = tty.readline().decode(errors="replace").strip().lower()
        return answer in ("y", "yes")

    return approve
