"""The interactive chat's own screen: the greeting, the `>>>` prompt and its short notes.

Answers are drawn by the chat renderer like any other turn; this is only what the REPL
itself says between turns, dimmed so the conversation stands out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


class ReplScreen:
    """The console the REPL prompts on (rich, on the terminal's stdout)."""

    def __init__(self, output: Output) -> None:
        self.console = output.console()

    def greet(self, model: str, help_text: str) -> None:
        """The first line: which model answers, and the commands."""
        from rich.markup import escape

        self.console.print(
            f"[dim]localgpt chat with [bold]{escape(model)}[/bold]. {help_text}[/dim]"
        )

    def ask(self) -> str:
        """What the person typed at `>>>`, stripped; Ctrl-C and Ctrl-D raise as usual."""
        from rich.prompt import Prompt

        text: str = Prompt.ask("[bold green]>>>[/]", console=self.console)
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

    def confirm(self, question: str) -> bool:
        """A y/N question at the prompt (anything but y or yes is no)."""
        from rich.markup import escape
        from rich.prompt import Prompt

        answer: str = Prompt.ask(escape(f"{question} [y/N]"), console=self.console, default="",
                                 show_default=False)
        return answer.strip().lower() in ("y", "yes")
