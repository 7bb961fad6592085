"""The interactive chat: a prompt loop where Ctrl-C stops the answer, not the program."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.cli.turn import ChatTurns

HELP = ("/new starts a new conversation, /remember keeps the last turn in memory (it never "
        "fades), /tools [GROUP,…|all|none] shows or sets the tool groups, /model "
        "[MODEL|PROFILE:MODEL] shows or switches the model, /exit (or Ctrl-D) quits, Ctrl-C "
        "stops an answer. Esc Enter (Alt-Enter) starts a multi-line message: Enter adds "
        "lines, Esc Enter sends it. Ctrl-R searches earlier questions, Tab completes a "
        "command.")

# The REPL's commands, in the order the unknown-command error lists them (Tab completes
# each); the aliases after /exit quit too.
COMMANDS = ("/help", "/new", "/remember", "/tools", "/model", "/exit", "/quit", "/bye", "/?")


def run_repl(turns: ChatTurns) -> None:
    """Ask and answer until /exit or Ctrl-D; each line continues the conversation the
    last answer was stored in, until /new starts another."""
    from localgpt_cli.render.repl import ReplScreen

    history = turns.app.settings.home_dir / "repl_history" if turns.kept else None
    screen = ReplScreen(turns.app.output, COMMANDS, history)
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
        if text.split()[0] == "/model":
            screen.note(switch_model(turns, text[len("/model"):].strip()))
            continue
        if unknown_command(text):
            screen.error(f"Unknown command {text.split()[0]}: nothing was sent. Commands: "
                         f"{', '.join(COMMANDS[:6])}.")
            continue
        outcome = turns.run(turns.request(text, conversation_id=conversation_id))
        conversation_id = outcome.conversation_id or conversation_id
        if outcome.previews:
            from localgpt_cli.cli.apply import offer_edits

            offer_edits(turns, screen, outcome.previews)
        last_answer = outcome.message_id or last_answer


def unknown_command(text: str) -> bool:
    """Whether `text` starts with a slash word that is no command (`/foo`): a typo that
    should not reach the model and the history. A path (`/etc/hosts is …`) has a second
    slash in its first word and is asked as written."""
    word = text.split()[0]
    return word.startswith("/") and "/" not in word[1:] and word not in COMMANDS


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


def switch_model(turns: ChatTurns, arg: str) -> str:
    """`/model` shows `provider:model`; `/model MODEL` switches the next turns to MODEL on
    the current provider, `/model PROFILE:MODEL` (or `PROFILE:`, its default_model) to that
    profile, as `chat -m` would. The answers stored afterwards carry the new provider and
    model. A model or profile that does not exist changes nothing: the REPL says so in one
    line and goes on with the model it had."""
    from localgpt_cli.errors import LocalGPTError, ModelNotFound, OllamaUnreachable

    app = turns.app
    if not arg:
        return f"Model: {app.settings.provider}:{turns.model}."
    prefix, sep, rest = arg.partition(":")
    profiles = app.settings.profiles
    configured = ", ".join(dict.fromkeys(["ollama", *profiles]))
    if sep and not rest and prefix not in profiles and prefix != "ollama":
        return f"No provider profile {prefix!r}; configured: {configured}."
    if sep and not rest and not getattr(profiles.get(prefix), "default_model", None):
        return f"{prefix!r} has no default_model: name one, /model {prefix}:MODEL."
    try:
        with app.trial():
            app.set_flag("model", arg)
            app.set_flag("provider", app.settings.provider)  # `/model M` later stays on it
            try:
                model = app.catalog.show_resolved(app.settings.model, app.output.warn).name
            except OllamaUnreachable:  # the next turn says so; the name stands as given
                model = app.settings.model
    except LocalGPTError as exc:
        if isinstance(exc, ModelNotFound) and sep and prefix not in profiles:
            return f"{exc} No provider profile {prefix!r} either; configured: {configured}."
        return str(exc)
    turns.model = model
    return f"Model: {app.settings.provider}:{model} (from the next question on)."
