"""Previews as the user sees them: a framed block in plain text, a panel on a terminal.

A preview is the part of an answer the user acts on, so it is on stdout (after the
answer, never mixed into it), framed so it cannot be mistaken for the model's prose, and
says what to do next: a command is the user's to run, an edit is applied with
`localgpt apply ID`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output

NEXT = {
    "command": 'not run; yours to run, e.g. eval "$(localgpt history last-preview)"',
    "edit": "not applied; apply it with: localgpt apply {id}",
    "file": "not written",
}
# Not in the history (--no-save, history.backend = "memory"): `history last-preview` would
# hand back an older, different command, so the footer must not point at it.
NEXT_UNKEPT = {
    "command": "not run; yours to copy (not kept in the history)",
    "edit": "not applied; not kept in the history, so `localgpt apply` cannot find it",
    "file": "not written",
}


def body(preview: dict[str, Any]) -> str:
    """The text a preview shows: the command, the diff, or the file's text."""
    kind = preview.get("kind")
    if kind == "command":
        return str(preview.get("command", ""))
    if kind == "edit":
        return str(preview.get("diff", "")).rstrip("\n")
    return str(preview.get("text") or "").rstrip("\n")


def title(preview: dict[str, Any]) -> str:
    """`preview 3f9a1c2e: edit /home/me/notes.md`."""
    where = f" {preview['path']}" if preview.get("path") else ""
    return f"preview {preview.get('id', '?')}: {preview.get('kind')}{where}"


def footer(preview: dict[str, Any], kept: bool = True) -> str:
    """What to do next; `kept` False when the history does not keep the preview."""
    texts = NEXT if kept else NEXT_UNKEPT
    return texts.get(str(preview.get("kind")), "").format(id=preview.get("id", "?"))


def plain_block(preview: dict[str, Any], kept: bool = True, note: str | None = None) -> str:
    """The framed block of plain mode (and `history show`): header, explanation, body,
    what to do with it (`note` instead, when given)."""
    lines = [f"===== {title(preview)} ====="]
    if preview.get("explanation"):
        lines.append(f"# {preview['explanation']}")
    lines.append(body(preview))
    lines.append(f"===== {footer(preview, kept) if note is None else note} =====")
    return "\n".join(lines) + "\n"


def panel(preview: dict[str, Any], kept: bool = True, note: str | None = None) -> Any:
    """A rich panel: a diff coloured as a diff, a command highlighted as shell."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    lexer = {"command": "bash", "edit": "diff"}.get(str(preview.get("kind")), "text")
    parts: list[Any] = []
    if preview.get("explanation"):
        parts.append(Text(str(preview["explanation"]), style="italic"))
    parts.append(Syntax(body(preview), lexer, theme="ansi_dark", word_wrap=True,
                        background_color="default"))
    # Text, not markup: a path or command may hold [brackets]
    subtitle = Text(footer(preview, kept) if note is None else note)
    return Panel(Group(*parts), title=Text(title(preview)), title_align="left",
                 subtitle=subtitle, subtitle_align="left", border_style="cyan")


def review(output: Output, preview: dict[str, Any]) -> None:
    """The diff `localgpt apply` is about to write, on stderr before the question (stdout
    keeps the result): a panel on a terminal, the framed block elsewhere."""
    imported = " (imported: read every line)" if preview.get("imported") else ""
    note = f"to be applied{imported}"
    if output.err_console().is_terminal:
        output.err_console().print(panel(preview, note=note))
    else:
        output.stderr.write(plain_block(preview, note=note))
        output.stderr.flush()
