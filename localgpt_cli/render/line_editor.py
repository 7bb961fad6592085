"""The REPL's line editor: prompt_toolkit, so what people type or paste arrives whole.

Without an editor the terminal's own line discipline reads the line: it keeps 4,095
characters of a long paste, stores arrow keys as `\\x1b[D` and turns each line of a pasted
stack trace into a question of its own. prompt_toolkit reads keys in raw mode instead and
turns on bracketed paste, so a pasted block is one question however many lines it has; it
gives Ctrl-R search, history across sessions (a file in the data folder, mode 0600) and
completion of the slash commands. Esc Enter (Alt-Enter) starts a multi-line message: Enter
then adds lines, and Esc Enter sends it. Chosen over the standard `readline` by measurement
(README, "The REPL's line editor"). Only the REPL imports this module, so `localgpt --help`
and one-shot chats never load prompt_toolkit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import ColorDepth


class SlashCommands(Completer):
    """Tab completes a slash command at the start of the line (`/he` -> `/help`); a
    question is never completed."""

    def __init__(self, commands: Iterable[str]) -> None:
        self.commands = list(commands)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(c.isspace() for c in typed):
            return
        for command in self.commands:
            if command.startswith(typed):
                yield Completion(command, start_position=-len(typed))


def private_history(path: Path) -> FileHistory:
    """The typed lines of every session, in `path`, readable by its owner only (mode
    0600, as history.db): what people paste into a chat can be private. A file left
    with a wider mode by hand is narrowed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    return FileHistory(str(path))


class LineEditor:
    """One prompt_toolkit session for the whole REPL (its history, completer and keys)."""

    def __init__(self, commands: Iterable[str], history_path: Path | None, color: bool) -> None:
        self.multiline = False  # set by Esc Enter, for the message being typed
        history: History = InMemoryHistory() if history_path is None \
            else private_history(history_path)  # fmt: skip
        self.session: PromptSession[str] = PromptSession(
            history=history,
            completer=SlashCommands(commands),
            complete_while_typing=False,
            multiline=Condition(lambda: self.multiline),
            key_bindings=self._keys(),
            prompt_continuation="... ",
            color_depth=None if color else ColorDepth.MONOCHROME,
            enable_suspend=True,  # Ctrl-Z suspends, as it did on the plain terminal
        )

    def _keys(self) -> KeyBindings:
        """Esc Enter (what Alt-Enter sends) on a one-line message makes it multi-line;
        once multi-line, prompt_toolkit's own Esc Enter sends it."""
        keys = KeyBindings()

        @keys.add("escape", "enter", filter=Condition(lambda: not self.multiline))
        def _start_multiline(event: KeyPressEvent) -> None:
            self.multiline = True
            event.current_buffer.newline(copy_margin=False)

        return keys

    def read(self) -> str:
        """The next message, as typed or pasted; Ctrl-C raises KeyboardInterrupt and
        Ctrl-D on an empty line EOFError, as `input()` does."""
        self.multiline = False
        return self.session.prompt(FormattedText([("ansigreen bold", ">>> ")]))
