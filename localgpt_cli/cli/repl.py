"""The interactive chat: a prompt loop where Ctrl-C stops the answer, not the program."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.cli.turn import ChatTurns

HELP = "/new starts a new conversation, /exit (or Ctrl-D) quits, Ctrl-C stops an answer."


def run_repl(turns: ChatTurns) -> None:
    """Ask and answer until /exit or Ctrl-D; each line continues the conversation the
    last answer was stored in, until /new starts another."""
    from rich.prompt import Prompt

    console = turns.app.output.console()
    console.print(f"[dim]localgpt chat with [bold]{turns.model}[/bold]. {HELP}[/dim]")
    conversation_id = turns.conversation_id
    while True:
        try:
            text = Prompt.ask("[bold green]>>>[/]", console=console).strip()
        except KeyboardInterrupt:
            console.print("\n[dim](/exit or Ctrl-D to quit)[/dim]")
            continue
        except EOFError:
            console.print()
            return
        if not text:
            continue
        if text in ("/exit", "/quit", "/bye"):
            return
        if text == "/new":
            conversation_id = None
            console.print("[dim]New conversation.[/dim]")
            continue
        if text in ("/help", "/?"):
            console.print(f"[dim]{HELP}[/dim]")
            continue
        outcome = turns.run(turns.request(text, conversation_id=conversation_id))
        conversation_id = outcome.conversation_id or conversation_id
