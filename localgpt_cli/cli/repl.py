"""The interactive chat: a prompt loop where Ctrl-C stops the answer, not the program."""

from __future__ import annotations

from typing import Any

from localgpt_cli.cli.app import App

HELP = "/new starts a new conversation, /exit (or Ctrl-D) quits, Ctrl-C stops an answer."


def run_repl(
    app: App, base: dict[str, Any], hide_thinking: bool, store: Any = None,
    toolbox: Any = None, retriever: Any = None,
) -> None:
    from localgpt_cli.cli.chat import run_turn
    from localgpt_cli.render.repl import ReplScreen

    screen = ReplScreen(app.output)
    screen.greet(base["model"], HELP)
    conversation_id = base.get("conversation_id")
    while True:
        try:
            text = screen.ask()
        except KeyboardInterrupt:
            screen.interrupted()
            continue
        except EOFError:
            screen.end()
            return
        if not text:
            continue
        if text in ("/exit", "/quit", "/bye"):
            return
        if text == "/new":
            conversation_id = None
            screen.note("New conversation.")
            continue
        if text in ("/help", "/?"):
            screen.note(HELP)
            continue
        request = base | {"prompt": text, "stdin_text": None, "conversation_id": conversation_id}
        outcome = run_turn(app, request, hide_thinking, store, toolbox, retriever)
        conversation_id = outcome.conversation_id or conversation_id
