"""No control character from a model, a file or the history reaches a terminal raw
(issue 25, item 2).

Each case runs localgpt on a real pseudo-terminal and reads the bytes the terminal got:
the hostile text must arrive made visible (`^[`, `<U+009B>`), and no OSC, BEL, colour
or C1 byte of it may arrive at all; only localgpt's own styling is escape codes (NO_COLOR
keeps that to bold/dim and cursor moves, so a colour in the output can only be foreign).
A pipe keeps the exact bytes, and --json the exact text, JSON-escaped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import ROOT, invoke
from tests.pty_run import run_on_pty
from tests.standin import Reply

QUESTION = "hello \x1b]0;PWNED\x07 \x1b[31mRED"
# the answer streams with its sequences split across tokens
TOKENS = ["Title ", "\x1b", "]0;OWNED\x07 and \x1b", "[32mGREEN", " \u009b", "2J shift\x0eout"]
ANSWER = "".join(TOKENS)
SEEN = {"^[]0;OWNED", "^[[32mGREEN", "<U+009B>2J", "shift^Nout"}


def assert_only_our_styling(screen: bytes) -> None:
    """Nothing but CSI sequences (rich's styles and cursor moves), none of them a colour,
    and no BEL, shift-out, OSC/DCS or C1 character."""
    for foreign in (b"\x07", b"\x0e", b"\x1b]", b"\x1bP", b"\x1b[31m", b"\x1b[32m",
                    b"\x1b[2J", b"\xc2\x9b"):  # fmt: skip
        assert foreign not in screen, (foreign, screen[-1500:])
    assert re.findall(rb"\x1b[^\[]", screen) == []
    params = [int(n) for p in re.findall(rb"\x1b\[([0-9;]*)m", screen) for n in p.split(b";")
              if n]  # fmt: skip
    assert [n for n in params if 30 <= n < 50 or 90 <= n < 108] == []


def text_of(screen: bytes) -> bytes:
    """What the terminal shows as text: the screen without localgpt's own CSI codes."""
    return re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", screen)


def pty(*args: str, cwd: Path = ROOT, columns: int = 100) -> bytes:
    """The raw bytes a terminal got from `localgpt ARGS`, checked for foreign controls."""
    code, screen = run_on_pty(list(args), cwd=cwd, env={"NO_COLOR": "1", "COLUMNS": str(columns)})
    assert code == 0, screen[-2000:]
    assert_only_our_styling(screen)
    return text_of(screen)


def script_answer(standin) -> None:
    standin.script(Reply(content=TOKENS, thinking=["think \x1b", "]2;T\x07 done"]))


def test_a_streamed_answer_and_history_show_reach_the_terminal_made_visible(standin) -> None:
    script_answer(standin)
    screen = pty("chat", "-m", "qwen3", QUESTION)
    for text in SEEN:
        assert text.encode() in screen, (text, screen[-1500:])
    assert b"^[]2;T" in screen  # the thinking
    shown = pty("history", "show", "latest")
    assert b"^[]0;PWNED" in shown and b"^[[31mRED" in shown  # the question
    for text in SEEN:
        assert text.encode() in shown


def test_a_pipe_keeps_the_bytes_and_json_keeps_the_text_escaped(standin) -> None:
    script_answer(standin)
    piped = subprocess.run([sys.executable, "-m", "localgpt_cli", "chat", "--hide-thinking",
                            QUESTION], capture_output=True, cwd=ROOT, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == ANSWER.encode() + b"\n"
    script_answer(standin)
    r = subprocess.run([sys.executable, "-m", "localgpt_cli", "chat", "--json", QUESTION],
                       capture_output=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    for raw in (b"\x1b", b"\x07", b"\x0e", b"\xc2\x9b"):
        assert raw not in r.stdout
    packets = [json.loads(line) for line in r.stdout.splitlines()]
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == ANSWER
    shown = invoke("history", "show", "latest")
    assert QUESTION in shown.stdout and ANSWER in shown.stdout


def test_memory_errors_file_names_and_search_hits_are_made_visible(
    standin, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    evil = folder / "evil\x1b]0;FILE\x07.md"
    evil.write_text("# Quasar\n\nThe quasar manual says \x1b]0;CHUNK\x07 reboot twice.\n")
    assert invoke("ingest", str(folder)).exit_code == 0
    assert invoke("memory", "add", "fact \x1b]0;FACT\x07 kept").exit_code == 0
    screens = {
        "memory": pty("memory", "list"),
        "docs": pty("docs", "list", columns=400),  # wide enough for the whole temporary path
        "search": pty("search", "quasar manual"),
        "show": pty("docs", "show", str(evil)),
    }
    code, error = run_on_pty(["ingest", str(tmp_path / "nope\x1b]0;ERR\x07")],
                             env={"NO_COLOR": "1"})
    assert code == 6, error
    assert_only_our_styling(error)
    screens["error"] = text_of(error)
    assert b"fact ^[]0;FACT" in screens["memory"]  # rich drops the BEL itself
    assert b"^[]0;CHUNK" in screens["search"] and b"^[]0;CHUNK" in screens["show"]
    assert b"nope^[]0;ERR^G" in screens["error"]
    assert b'\\a.md"' in screens["docs"]  # the name C-quoted as git does (render/tables.py)


@pytest.mark.parametrize(("text", "shown"), [
    ("a\x1b[2Jb", "a^[[2Jb"), ("bell\x07", "bell^G"), ("cr\rlf", "cr^Mlf"), ("del\x7f", "del^?"),
    ("csi\u009b1m", "csi<U+009B>1m"), ("tab\tand\nnewline", "tab\tand\nnewline"),
    ("caf\u00e9 \u2014 ok", "caf\u00e9 \u2014 ok"),
])  # fmt: skip
def test_visible_shows_each_control_as_less_does(text: str, shown: str) -> None:
    from localgpt_cli.render.terminal import visible

    assert visible(text) == shown


def test_a_preview_panel_shows_the_commands_controls(standin) -> None:
    command = "printf '\x1b]0;CMD\x07' # \x1b[2K"
    standin.script(Reply(tool_calls=[{"name": "propose_command",
                                      "arguments": {"command": command,
                                                    "explanation": "x \x1b[41m y"}}],
                         offered_only=True), Reply(content="Shown."))  # fmt: skip
    screen = pty("chat", "show me")
    assert b"^[]0;CMD" in screen and b"^[[2K" in screen and b"x ^[[41m y" in screen
    last = invoke("history", "last-preview")  # a pipe: the exact command, for eval
    assert last.stdout == command + "\n"


def test_in_tmux_the_title_and_colours_stay_as_they_were(standin, tmp_path: Path) -> None:
    """The issue's own case, in a real terminal emulator: tmux keeps the pane's title
    and draws no red after `localgpt chat` of a question and answer that try both."""
    import os
    import shlex
    import shutil
    import time

    from tests.requires import unavailable

    if shutil.which("tmux") is None:
        unavailable("tmux is not installed")
    standin.script(Reply(content=TOKENS + [" \x1b]2;PWNED\x07 \x1b[31mRED"]))
    socket = f"lg-apply-{os.getpid()}"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in os.environ.items()
                   if k.startswith(("LOCALGPT_", "XDG_", "OLLAMA_")))  # fmt: skip
    done = tmp_path / "done"
    command = (f"cd {ROOT} && env {env} PYTHONPATH={ROOT} {sys.executable} -m localgpt_cli "
               f"chat {shlex.quote(QUESTION)}; echo $? > {done}; sleep 60")
    tmux = ["tmux", "-L", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "100", "-y", "20", command], check=True)
    try:
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "0"
        title = subprocess.run([*tmux, "display", "-p", "#{pane_title}"], capture_output=True,
                               text=True, check=True).stdout
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-e"], capture_output=True,
                                check=True).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    assert "PWNED" not in title and "OWNED" not in title
    assert b"\x1b[31m" not in screen and b"\x1b[32m" not in screen
    assert b"^[]2;PWNED" in screen and b"^[[31mRED" in screen


def test_a_usage_error_shows_the_arguments_controls(isolated_env) -> None:
    """click's own messages quote what was typed, or pasted: before, `config get` with a
    pasted log line wrote it to the terminal raw ("Got unexpected extra arguments (…)")."""
    code, screen = run_on_pty(["config", "get", "x\x1b]0;USAGE\x07 \u009b2J"],
                              env={"NO_COLOR": "1"})
    assert code == 2, screen
    assert_only_our_styling(screen)
    assert b"x^[]0;USAGE^G <U+009B>2J" in text_of(screen)
