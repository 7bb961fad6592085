"""Builds the tools a `chat` turn may use, shared by `chat` and `localgpt tools`.

The registry is the same for both commands, so `localgpt tools list` shows exactly
what a chat with the same flags would offer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localgpt_cli.cli.app import App
from localgpt_cli.config import cache_dir, config_file
from localgpt_cli.errors import InvalidInput, LocalGPTError, UsageError, setting_error

SELECTION_LIMIT = 12
SELECTION_TOP_K = 6


@dataclass(frozen=True)
class FileRoots:
    """The folders the file tools may read in this command. `excluded` says why the
    current folder is not among them (`home` or `root`), or is None when it is."""

    roots: tuple[str, ...]
    cwd: str
    excluded: str | None = None

    def report(self) -> dict[str, Any] | None:
        """`done.files`: said only when the current folder was left out."""
        if self.excluded is None:
            return None
        return {"cwd": self.cwd, "cwd_excluded": self.excluded, "roots": list(self.roots)}


def file_roots(app: App, allow_folders: Sequence[str] = (), cwd: str | None = None) -> FileRoots:
    """What read_file, list_directory and propose_edit may see (and `apply` may write):
    the current folder, the folders of `tools.files.folders` and `--allow-folder`.

    The current folder is left out when it is $HOME or /: there it would hand the model
    every file the user has. The ingested collection's roots then take its place.
    """
    here = os.path.realpath(cwd or os.getcwd())
    home = os.path.realpath(Path.home())
    excluded = "home" if here == home else "root" if here == os.sep else None
    configured = app.settings.values.get("tools.files.folders") or ()
    named = [os.path.realpath(os.path.expanduser(p)) for p in (*configured, *allow_folders)]
    roots = [*collection_roots(app, home)] if excluded else [here]
    roots += [p for p in named if p not in roots]
    return FileRoots(tuple(roots), here, excluded)


def collection_roots(app: App, home: str) -> list[str]:
    """The folders the collection's documents were ingested from (a document lying in
    $HOME or / itself is a root alone); none for a store that is not a folder here."""
    from localgpt_cli.rag.manifest import OK, LocalFile, Manifest, manifest_file

    settings = app.settings
    file = manifest_file(settings.db_uri, settings.home_dir, settings.collection)
    if not isinstance(file, LocalFile):
        return []
    try:
        entries = Manifest.load(file, settings.db_uri, settings.collection).entries
    except (OSError, LocalGPTError):
        return []
    folders = set()
    for path, entry in entries.items():
        if entry.status == OK:
            parent = os.path.dirname(path)
            folders.add(path if parent in (home, os.sep) else parent)
    roots: list[str] = []
    for folder in sorted(folders, key=len):
        if not any(folder == r or folder.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            roots.append(folder)
    return roots


def deny_list(app: App) -> Any:
    """The secrets rules of this command: the built-in ones over localgpt's own config
    and history, with `tools.files.deny` and `tools.files.allow`."""
    from localgpt_cli.tools.denylist import DenyList

    settings = app.settings
    home = settings.home_dir
    return DenyList(own=[config_file(), home / "history.db", home / "memory.jsonl"],
                    deny=settings.values.get("tools.files.deny") or (),
                    allow=settings.values.get("tools.files.allow") or ())


def _context(
    app: App, search: Any, no_search: str | None = None, roots: FileRoots | None = None
) -> Any:
    """The ToolContext of this command: the client's web calls, the knowledge base search,
    the file tools' roots and secrets rules, and OCR for read_file on a picture."""
    from localgpt_cli.cli.ocr import picture_reader
    from localgpt_cli.tools.registry import ToolContext

    client = app.client
    roots = roots or file_roots(app)
    return ToolContext(
        file_roots=roots.roots, include_cwd=False, deny=deny_list(app), warn=app.output.warn,
        search=search,
        # Ollama's hosted web tools; a provider without them offers none
        web_search=getattr(client, "web_search", None),
        web_fetch=getattr(client, "web_fetch", None),
        ollama_api_key_set=bool(os.environ.get("OLLAMA_API_KEY")),
        no_search=no_search or ToolContext.no_search, ocr=picture_reader(app),
    )


def build_registry(
    app: App, functions: Sequence[str] = (), search: Any = None, roots: FileRoots | None = None
) -> Any:
    """Built-ins, plugins and --functions files; warnings go to stderr."""
    from localgpt_cli.tools.registry import build_registry

    context = _context(app, search, roots=roots)
    registry, warnings = build_registry(context, functions_files=list(functions))
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
                                    search=turns.search, allow_folders=flags.allow_folders)
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
    allow_folders: Sequence[str] = (),
) -> Any:
    """The Toolbox for a turn: enabled tools, the allowed groups, selection, approval."""
    from localgpt_cli.kernel.request import Toolbox

    roots = file_roots(app, allow_folders)
    registry = build_registry(app, functions, search, roots)
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
                      approve=_terminal_approval() if approve else None, groups=groups,
                      files=roots.report(), approve_network=_network_approval)
    return toolbox


def _network_approval(name: str, arguments: dict[str, Any]) -> bool | None:
    """Ask on the terminal before a tool sends data off the machine in a turn that has
    read local files; None when there is no terminal to ask on (the call is refused)."""
    from localgpt_cli.render.chat import tool_line
    from localgpt_cli.render.terminal import visible

    try:
        tty = open("/dev/tty", "r+b", buffering=0)  # noqa: SIM115 - closed below
    except OSError:
        return None
    with tty:  # the model chose the arguments: shown, never obeyed
        tty.write(f"This turn has read local files. Send {visible(tool_line(name, arguments))} off "
                  "this machine? [y/N] ".encode())
        answer = tty.readline().decode(errors="replace").strip().lower()
    return answer in ("y", "yes")


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
