"""Preview tools: the model proposes, the user disposes.

A preview tool never acts. Its handler returns a `Preview` (a shell command, a patch, a
file) that is shown to the user; the model only receives `preview_sent` and the
preview's id, so it can go on ("I've shown you the command"). localgpt never runs a
proposed command; a proposed edit is written only by `localgpt apply ID` (or `y` at the
REPL), which checks the file is still the one the diff was made against (tools/edit.py).

Plugins make their own: `Tool(..., preview=True)` whose handler returns `Preview(kind=…)`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from localgpt_cli.tools.base import Tool, ToolError
from localgpt_cli.tools.denylist import HEAD_BYTES, DenyList
from localgpt_cli.tools.patch import apply_hunks, parse_diff, read_text, sha256, unified
from localgpt_cli.tools.sandbox import Sandbox

MAX_COMMAND_CHARS = 4_000
PREVIEW_KINDS = ("command", "edit", "file")


@dataclass
class Preview:
    """What a preview tool shows the user. `kind` is `command` (with `command`), `edit`
    (`path`, `diff` and the file's `sha256` when the diff was made) or `file` (`path`,
    `text`); `explanation` is one line saying why. `id` is set when it is sent.

    `roots` are the absolute folders the tool call could touch: `localgpt apply` checks
    the edit's file against them as well as against the folder it runs in, so an edit
    proposed in ~/proj can be applied from ~ and still never lands outside ~/proj."""

    kind: str
    command: str | None = None
    diff: str | None = None
    path: str | None = None
    text: str | None = None
    explanation: str | None = None
    sha256: str | None = None
    roots: list[str] | None = None
    id: str = ""

    def payload(self) -> dict[str, Any]:
        """The `preview` object of the `tool_result` packet and of the stored message."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def new_preview_id() -> str:
    """Eight hex digits: short enough to type after `localgpt apply`."""
    return secrets.token_hex(4)


def check_preview(value: Any, tool: str) -> Preview:
    """A preview tool's return value as a Preview, or a ToolError the model and user read."""
    if not isinstance(value, Preview):
        raise ToolError(f"{tool} is a preview tool but returned {type(value).__name__}, "
                        "not a Preview")
    if value.kind not in PREVIEW_KINDS:
        raise ToolError(f"{tool} returned a preview of kind {value.kind!r}; "
                        f"expected one of {', '.join(PREVIEW_KINDS)}")
    needs = {"command": ("command",), "edit": ("path", "diff", "sha256"),
             "file": ("path",)}[value.kind]
    missing = [name for name in needs if not isinstance(getattr(value, name), str)]
    if missing:
        raise ToolError(f"{tool} returned a {value.kind} preview without {', '.join(missing)}")
    for name in ("command", "diff", "path", "text", "explanation"):
        field = getattr(value, name)
        if field is not None and (not isinstance(field, str) or "\x00" in field):
            raise ToolError(f"{tool} returned a preview whose {name} is not text without NUL bytes")
    if value.roots is not None and not recorded_roots(value.roots):
        raise ToolError(f"{tool} returned a preview whose roots are not absolute folders")
    return value


def recorded_roots(value: Any) -> list[str] | None:
    """A preview's `roots` when they are a non-empty list of absolute paths; else None
    (a preview stored before roots were recorded, or a malformed one)."""
    if not isinstance(value, list) or not value:
        return None
    ok = all(isinstance(r, str) and "\x00" not in r and Path(r).is_absolute() for r in value)
    return list(value) if ok else None


def preview_tools(
    roots: Sequence[Path | str], base: Path | str | None = None, deny: DenyList | None = None
) -> list[Tool]:
    """`propose_command` (group shell) and `propose_edit` (group files, over the read_file
    roots)."""
    sandbox = Sandbox(roots, base, deny)
    return [_command_tool(), _edit_tool(sandbox)]


def propose_command(command: str, explanation: str = "") -> Preview:
    if "\x00" in command or "\x00" in explanation:
        raise ToolError("the command contains a NUL byte; a shell cannot run it")
    if not command.strip():
        raise ToolError("the command is empty: say what the user should run")
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(f"the command is {len(command)} characters long; at most "
                        f"{MAX_COMMAND_CHARS}: propose a script file with propose_edit instead")
    return Preview("command", command=command.strip("\n"),
                   explanation=" ".join(explanation.split()) or None)


def propose_edit(sandbox: Sandbox, path: str, diff: str, explanation: str = "") -> Preview:
    real = sandbox.resolve(path)
    data, before = read_text(real, path)
    sandbox.check_head(real, path, data[:HEAD_BYTES])
    after = apply_hunks(before, parse_diff(diff))
    if after == before:
        raise ToolError("the diff changes nothing in the file")
    return Preview("edit", path=str(real), diff=unified(path, before, after),
                   explanation=" ".join(explanation.split()) or None, sha256=sha256(data),
                   roots=[str(root) for root in sandbox.roots])


def _command_tool() -> Tool:
    def run(args: dict[str, Any]) -> Preview:
        return propose_command(args["command"], args.get("explanation", ""))

    return Tool(
        name="propose_command",
        description=(
            "Show the user a shell command to run themselves, with a one-line explanation. "
            "The command is NOT run: the user sees it and decides. Use it whenever the "
            "answer is a command (find, git, docker, ...)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the shell command, exactly"},
                "explanation": {"type": "string", "description": "one line: what it does"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        handler=run,
        examples=("how do I delete log files older than a week?",
                  "give me the git command to undo my last commit",
                  "what command shows which process uses port 8080?"),
        core=True,
        group="shell",
        preview=True,
    )


def _edit_tool(sandbox: Sandbox) -> Tool:
    def run(args: dict[str, Any]) -> Preview:
        return propose_edit(sandbox, args["path"], args["diff"], args.get("explanation", ""))

    return Tool(
        name="propose_edit",
        description=(
            "Propose a change to a text file as a unified diff (@@ -a,b +c,d @@ hunks with "
            "' ', '-', '+' lines; read the file first). The file is NOT changed: the user "
            f"sees the diff and applies it with `localgpt apply`. Allowed folders: "
            f"{sandbox.roots_text()}."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file to change"},
                "diff": {"type": "string", "description": "a unified diff against the file"},
                "explanation": {"type": "string", "description": "one line: what it changes"},
            },
            "required": ["path", "diff"],
            "additionalProperties": False,
        },
        handler=run,
        examples=("fix the typo in README.md", "change the port in config.toml to 8080",
                  "add a .gitignore entry for build/"),
        group="files",
        reads_local=True,
        preview=True,
    )
