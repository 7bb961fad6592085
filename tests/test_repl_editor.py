"""The REPL's line editor in a real terminal (tmux), issue 25 items 3 and 4: a paste is one
question, long lines arrive whole, keys edit instead of being stored, history across
sessions (mode 0600, none under --no-save), Ctrl-R, Tab, the multi-line mode, unknown
commands and Ctrl-C at the apply question. Each checks what was sent and stored."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from localgpt_cli.history.sqlite import SQLiteStore
from tests.standin import Reply
from tests.tmux import Tmux

pytestmark = pytest.mark.timeout(180)

TRACE = ('Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
         "    main()\nNameError: name 'main' is not defined")  # fmt: skip


@pytest.fixture
def repl(standin, tmp_path: Path):
    """Start `localgpt chat ARGS` in tmux at its first prompt; stopped after the test."""
    started: list[Tmux] = []

    def start(*args: str, cwd: str | os.PathLike[str] | None = None) -> Tmux:
        term = Tmux(tmp_path, "chat", *args, **({"cwd": cwd} if cwd else {}))
        started.append(term)
        term.wait_for(">>>")
        return term

    yield start
    for term in started:
        term.close()


def stored() -> list[list[tuple[str, str]]]:
    """(role, content) of every stored conversation, oldest first."""
    path = os.path.join(os.environ["LOCALGPT_HOME"], "history.db")
    if not os.path.exists(path):
        return []
    with SQLiteStore.open(path) as store:
        conversations = sorted(store.list_conversations(), key=lambda c: c.created_at)
        return [[(m.role, m.content) for m in store.messages(c.id)] for c in conversations]


def questions(standin) -> list[str]:
    return [r["messages"][-1]["content"] for r in standin.chat_requests()]


def test_a_pasted_stack_trace_is_one_question(standin, repl) -> None:
    standin.script(Reply(content="A NameError."))
    term = repl()
    term.paste(TRACE)
    term.keys("Enter")
    term.wait_for("A NameError.")
    term.at_prompt()
    term.type("/exit")
    term.keys("Enter")
    assert term.wait() == 0
    assert questions(standin) == [TRACE]
    assert stored() == [[("user", TRACE), ("assistant", "A NameError.")]]


def test_a_15007_character_paste_arrives_whole_and_arrow_keys_edit(standin, repl) -> None:
    long_line = "".join(f"{i:05d} " for i in range(2502))[:15007]  # no trailing space
    standin.script(Reply(content="Long one."), Reply(content="Edited."))
    term = repl()
    term.paste(long_line)
    term.keys("Enter")
    term.wait_for("Long one.", timeout=60)
    term.at_prompt()
    term.type("abc")
    term.keys("Left", "Left")
    term.type("X")
    term.keys("Enter")
    term.wait_for("Edited.")
    assert term.quit() == 0
    assert questions(standin) == [long_line, "aXbc"]
    (conversation,) = stored()
    assert len(conversation[0][1]) == 15007 and conversation[0][1] == long_line
    assert conversation[2] == ("user", "aXbc")
    assert not any("\x1b" in content for _, content in conversation)


def test_history_is_kept_across_sessions_in_a_private_file_and_ctrl_r_finds_it(
    standin, repl, isolated_env: Path
) -> None:
    standin.script(Reply(content="Lima."), Reply(content="Lima again."))
    term = repl()
    term.type("what is the capital of Peru?")
    term.keys("Enter")
    term.wait_for("Lima.")
    assert term.quit() == 0
    history = Path(os.environ["LOCALGPT_HOME"]) / "repl_history"
    assert history.stat().st_mode & 0o777 == 0o600
    assert "what is the capital of Peru?" in history.read_text()

    term = repl()  # a new session finds the earlier line by Ctrl-R
    term.keys("C-r")
    term.type("Peru")
    term.wait_for("capital of Peru?")
    term.keys("Enter")  # leaves the search with the line found
    term.keys("Enter")  # sends it
    term.wait_for("Lima again.")
    assert term.quit() == 0
    assert questions(standin) == ["what is the capital of Peru?"] * 2
    assert [c[0] for c in stored()] == [("user", "what is the capital of Peru?")] * 2


def test_no_save_writes_no_history_file(standin, repl) -> None:
    standin.script(Reply(content="Kept nowhere."))
    term = repl("--no-save")
    term.type("a private question")
    term.keys("Enter")
    term.wait_for("Kept nowhere.")
    assert term.quit() == 0
    assert questions(standin) == ["a private question"]
    assert not (Path(os.environ["LOCALGPT_HOME"]) / "repl_history").exists()
    assert stored() == []


def test_tab_completes_a_command_and_esc_enter_makes_one_multi_line_question(
    standin, repl
) -> None:
    standin.script(Reply(content="Two lines read."))
    term = repl()
    term.type("/he")
    term.keys("Tab")
    term.wait_for(">>> /help")
    term.keys("Enter")
    term.wait_for(">>> /help\n/new starts a new conversation")
    term.type("first line")
    term.keys("Escape", "Enter")  # Alt-Enter: multi-line from here on
    term.type("second line")
    term.keys("Enter")  # a new line, not sent
    term.type("third line")
    term.keys("Escape", "Enter")  # sends the three lines
    term.wait_for("Two lines read.")
    assert term.quit() == 0
    assert questions(standin) == ["first line\nsecond line\nthird line"]


def test_an_unknown_command_is_an_error_listing_the_commands(standin, repl) -> None:
    term = repl()
    term.type("/foo bar")
    term.keys("Enter")
    screen = term.wait_for("Unknown command /foo")
    assert ("Unknown command /foo: nothing was sent. Commands: /help, /new, /remember, "
            "/tools, /model, /exit.") in screen
    assert ">>> /foo bar" in screen and ">>>:" not in screen  # the prompt, as typed at
    assert term.quit() == 0
    assert standin.chat_requests() == []
    assert stored() == []


NOTES = "The port is 8000.\n"
DIFF = "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-The port is 8000.\n+The port is 8080.\n"


@pytest.mark.parametrize("save", [True, False], ids=["saved", "no-save"])
def test_ctrl_c_at_the_apply_question_answers_no_and_the_repl_goes_on(
    standin, repl, tmp_path: Path, save: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text(NOTES)
    edit = {"name": "propose_edit", "arguments": {"path": "notes.md", "diff": DIFF}}
    standin.script(Reply(tool_calls=[edit], offered_only=True), Reply(content="Proposed."),
                   Reply(content="Still here."))
    term = repl(*([] if save else ["--no-save"]), cwd=work)
    term.type("change the port")
    term.keys("Enter")
    term.wait_for("[y/N]")
    term.keys("C-c")
    term.wait_for("Not applied")
    term.at_prompt()
    term.type("are you there?")
    term.keys("Enter")
    term.wait_for("Still here.")
    assert term.quit() == 0
    assert (work / "notes.md").read_text() == NOTES
    assert questions(standin)[-1] == "are you there?"
    assert sorted(p.name for p in work.iterdir()) == ["notes.md"]


def test_a_history_file_that_cannot_be_opened_leaves_a_working_repl(standin, repl) -> None:
    """A folder where the history file goes: one line saying so, the REPL works."""
    (Path(os.environ["LOCALGPT_HOME"]) / "repl_history").mkdir()
    standin.script(Reply(content="Works anyway."))
    term = repl()
    screen = term.wait_for("Questions are not kept for later sessions")
    assert "Is a directory: " in screen and "Traceback" not in screen
    term.type("still asking")
    term.keys("Enter")
    term.wait_for("Works anyway.")
    assert term.quit() == 0
    assert stored() == [[("user", "still asking"), ("assistant", "Works anyway.")]]


def test_an_earlier_history_file_is_narrowed_to_0600_and_up_recalls_its_last_line(
    standin, repl
) -> None:
    history = Path(os.environ["LOCALGPT_HOME"]) / "repl_history"
    history.write_text("\n# 2026-01-01 10:00:00\n+older question\n\n# 2026-01-02 10:00:00\n"
                       "+last question\n+on two lines\n")
    history.chmod(0o644)
    standin.script(Reply(content="Recalled."))
    term = repl()
    assert history.stat().st_mode & 0o777 == 0o600
    term.keys("Up")
    term.wait_for("... on two lines")
    term.keys("Enter")
    term.wait_for("Recalled.")
    assert term.quit() == 0
    assert questions(standin) == ["last question\non two lines"]


def test_a_dumb_terminal_reads_plain_lines_at_the_same_prompt(standin, tmp_path: Path) -> None:
    """TERM=dumb (Emacs's shell): no editor draws; lines are read as typed, at `>>> `."""
    standin.script(Reply(content="Plain."))
    term = Tmux(tmp_path, argv=["env", "TERM=dumb", sys.executable, "-m", "localgpt_cli",
                                "chat"])
    try:
        term.wait_for(">>>")
        term.type("hello there")
        term.keys("Enter")
        screen = term.wait_for("Plain.")
        assert ">>> hello there" in screen and ">>>:" not in screen
        term.at_prompt()
        term.keys("C-d")
        assert term.wait() == 0
    finally:
        term.close()
    assert questions(standin) == ["hello there"]
    assert not (Path(os.environ["LOCALGPT_HOME"]) / "repl_history").exists()
