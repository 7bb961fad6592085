"""The interactive chat: a prompt loop where Ctrl-C stops the answer, not the program."""

from __future__ import annotations

from typing import Any

from localgpt_cli.cli.app import App

HELP = "/new starts a new conversation, /exit (or Ctrl-D) quits, Ctrl-C stops an answer."


def run_repl(
    app: App, base: dict[str, Any], hide_thinking: bool, store: Any = None,
    toolbox: Any = None, retriever: Any = None,
) -> None:
    from rich.prompt import Prompt

    from localgpt_cli.cli.chat import run_turn

    console = app.output.console()
    console.print(f"[dim]localgpt chat with [bold]{base['model']}[/bold]. {HELP}[/dim]")
    conversation_id = base.get("conversation_id")
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
        request = base | {"prompt": text, "stdin_text": None, "conversation_id": conversation_id}
        outcome = run_turn(app, request, hide_thinking, store, toolbox, retriever)
        conversation_id = outcome.conversation_id or conversation_id
