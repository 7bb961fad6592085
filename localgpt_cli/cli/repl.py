"""The interactive chat: a prompt loop where Ctrl-C stops the answer, not the program."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.cli.turn import ChatTurns

HELP = ("/new starts a new conversation, /remember keeps the last turn in memory (it never "
        "fades), /tools [GROUP,…|all|none] shows or sets the tool groups, /exit (or Ctrl-D) "
        "quits, Ctrl-C stops an answer.")


def run_repl(turns: ChatTurns) -> None:
    """Ask and answer until /exit or Ctrl-D; each line continues the conversation the
    last answer was stored in, until /new starts another."""
    from localgpt_cli.render.repl import ReplScreen

    screen = ReplScreen(turns.app.output)
    screen.greet(turns.model, HELP)
    conversation_id = turns.conversation_id
    last_answer = _last_answer(turns)  # the message id /remember marks
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
            conversation_id = last_answer = None
            screen.note("New conversation.")
            continue
        if text == "/remember":
            screen.note(remember(turns, last_answer))
            continue
        if text in ("/help", "/?"):
            screen.note(HELP)
            continue
        if text.split()[0] == "/tools":
            from localgpt_cli.cli.toolbox import repl_tools

            screen.note(repl_tools(turns, text[len("/tools"):].strip()))
            continue
        outcome = turns.run(turns.request(text, conversation_id=conversation_id))
        conversation_id = outcome.conversation_id or conversation_id
        if outcome.previews:
            from localgpt_cli.cli.apply import offer_edits

            offer_edits(screen, outcome.previews, kept=turns.kept)
        last_answer = outcome.message_id or last_answer


def _last_answer(turns: ChatTurns) -> str | None:
    """The answer a REPL started with -c/--cid continues from, so /remember before the
    first question marks the turn the user was shown last time, not nothing."""
    if turns.store is None or turns.conversation_id is None:
        return None
    answers = [m for m in turns.store.messages(turns.conversation_id, last=20)
               if m.role == "assistant"]  # fmt: skip
    return answers[-1].id if answers else None


def remember(turns: ChatTurns, message_id: str | None) -> str:
    """Mark the last turn important (its answer's `metadata["important"]`): conversation
    memory then never lets it fade. Returns what to tell the user. Under --no-save the
    turns are in this process's memory, so marking works there too (until the REPL ends)."""
    if message_id is None or turns.store is None:
        return "No turn to remember yet: ask something first."
    turns.store.update_metadata(message_id, {"important": True})
    return "Remembered: the last turn stays in this conversation's memory."
