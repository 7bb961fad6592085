"""The interactive chat's own screen: the greeting, the `>>>` prompt and its short notes.

Answers are drawn by the chat renderer like any other turn; this is only what the REPL
itself says between turns, dimmed so the conversation stands out. On a terminal the
prompt is a line editor (render/line_editor.py); elsewhere (stdout piped, `TERM=dumb`)
plain lines are read, as `input()` reads them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


def _editing_terminal(output: Output) -> bool:
    """Whether a line editor can draw: stdin and stdout are terminals that understand
    escape sequences (Emacs's shell and other dumb terminals do not)."""
    try:
        stdin_tty = sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        stdin_tty = False
    return stdin_tty and output.pretty and os.environ.get("TERM") != "dumb"


class ReplScreen:
    """The console the REPL prompts on (rich, on the terminal's stdout)."""

    def __init__(self, output: Output, commands: Sequence[str] = (),
                 history_path: Path | None = None) -> None:
        """`commands` are completed by Tab; `history_path` keeps what was typed across
        sessions (None: this session only, as under --no-save)."""
        self.console = output.console()
        self.editor: Any = None
        if _editing_terminal(output):
            self.editor = self._editor(commands, history_path, output.use_color)

    def _editor(self, commands: Sequence[str], history_path: Path | None, color: bool) -> Any:
        """The line editor; when its history file cannot be opened (a read-only data
        folder, a folder in its place) the REPL still runs, keeping this session's lines
        only, and says so once."""
        from localgpt_cli.render.line_editor import LineEditor

        try:
            return LineEditor(commands, history_path, color=color)
        except OSError as exc:
            self.note(f"Questions are not kept for later sessions: {exc.strerror or exc}: "
                      f"{history_path}. Check that folder.")
            return LineEditor(commands, None, color=color)

    def greet(self, model: str, help_text: str) -> None:
        """The first line: which model answers, and the commands."""
        from rich.markup import escape

        self.console.print(
            f"[dim]localgpt chat with [bold]{escape(model)}[/bold]. {help_text}[/dim]"
        )

    def ask(self) -> str:
        """What the person typed or pasted at `>>> ` (a pasted block whole, newlines
        kept), stripped; Ctrl-C and Ctrl-D raise as `input()` does."""
        if self.editor is not None:
            text: str = self.editor.read()
        else:
            text = self.console.input("[bold green]>>>[/] ")
        return text.strip()

    def interrupted(self) -> None:
        """Ctrl-C at the prompt does not quit: say how to."""
        self.console.print("\n[dim](/exit or Ctrl-D to quit)[/dim]")

    def end(self) -> None:
        """Ctrl-D: end the prompt's line before the shell's prompt comes back."""
        self.console.print()

    def note(self, text: str) -> None:
        """A short dimmed note, such as `New conversation.` or the help; its text is never
        markup (a model's name or an error may hold brackets)."""
        from rich.markup import escape

        self.console.print(f"[dim]{escape(text)}[/dim]")

    def error(self, text: str) -> None:
        """A line saying what went wrong at the prompt (not dimmed: it needs reading)."""
        from rich.markup import escape

        self.console.print(f"[red]{escape(text)}[/red]")

    def confirm(self, question: str) -> bool:
        """A y/N question at the prompt (anything but y or yes is no). Ctrl-C or Ctrl-D
        answers no: they stop the question, not the REPL and its unsaved session."""
        from rich.markup import escape
        from rich.prompt import Prompt

        try:
            answer: str = Prompt.ask(escape(f"{question} [y/N]"), console=self.console,
                                     default="", show_default=False)
        except (KeyboardInterrupt, EOFError):
            self.console.print("no")
            return False
        return answer.strip().lower() in ("y", "yes")
