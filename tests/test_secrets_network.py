"""Issue 29, item 4: no way out in the same turn without asking. Once a turn has read a
local file, a tool that sends data off the machine (here a real installed plugin that
declares `network=True`) runs only after a yes typed on a real terminal, and is refused
when there is no terminal to ask on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import ROOT, run_in_pty
from tests.standin import Reply

PLUGIN = '''
import os
from localgpt_cli.tools.base import Tool


def _send(args):
    with open(os.environ["NETPLUG_LOG"], "a") as fh:
        fh.write(args["data"] + "\\n")
    return "sent"


def tools():
    return [Tool(name="send_out", description="Send text to the team's paste service.",
                 parameters={"type": "object", "properties": {"data": {"type": "string"}},
                             "required": ["data"]},
                 handler=_send, network=True, group="web")]
'''


@pytest.fixture
def plugin(tmp_path: Path) -> dict[str, str]:
    """A plugin installed the way pip installs one (a module and its dist-info with an
    entry point on the path), and the environment a `localgpt` process needs to load it."""
    site = tmp_path / "site"
    info = site / "netplug-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "netplug.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: netplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[localgpt.tools]\nnetplug = netplug:tools\n")
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "TERM": "xterm-256color",
            "NETPLUG_LOG": str(tmp_path / "sent.log"), "COLUMNS": "200"}


def send(data: str) -> dict:
    return {"name": "send_out", "arguments": {"data": data}}


def read_then_send(standin) -> None:
    standin.script(Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}]),
                   Reply(tool_calls=[send("the readme")]), Reply(content="Sent."))


def sent(env: dict[str, str]) -> str:
    log = Path(env["NETPLUG_LOG"])
    return log.read_text() if log.exists() else ""


def last_tool_result(standin) -> str:
    return standin.chat_requests()[-1]["messages"][-1]["content"]


def without_terminal(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`localgpt ARGS` in a new session: no controlling terminal, /dev/tty cannot open."""
    return subprocess.run([sys.executable, "-m", "localgpt_cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, start_new_session=True,
                          stdin=subprocess.DEVNULL)


def test_yes_on_the_terminal_lets_it_send(standin, plugin: dict[str, str]) -> None:
    read_then_send(standin)
    code, screen = run_in_pty(["chat", "send the readme to the team"], answer=b"y\n",
                              env=plugin, timeout=120)
    assert code == 0, screen
    assert b"This turn has read local files. Send send_out(" in screen
    assert b"off this machine? [y/N]" in screen
    assert sent(plugin) == "the readme\n"
    assert last_tool_result(standin) == "sent"


def test_no_on_the_terminal_refuses_it(standin, plugin: dict[str, str]) -> None:
    read_then_send(standin)
    code, screen = run_in_pty(["chat", "send the readme to the team"], answer=b"n\n",
                              env=plugin, timeout=120)
    assert code == 0, screen
    assert sent(plugin) == ""
    assert last_tool_result(standin).startswith(
        "Error: the user declined to let send_out send data off this machine")


def test_without_a_terminal_it_is_refused(standin, plugin: dict[str, str]) -> None:
    read_then_send(standin)
    p = without_terminal(plugin, "chat", "--json", "send the readme to the team")
    assert p.returncode == 0, p.stderr
    assert sent(plugin) == ""
    results = [json.loads(line)["payload"] for line in p.stdout.splitlines()
               if json.loads(line)["type"] == "tool_result"]
    assert [r["ok"] for r in results] == [True, False]
    assert "needs the user's approval on a terminal, and there is none" in results[1]["result"]


def test_a_turn_that_read_nothing_local_sends_without_asking(standin, plugin) -> None:
    standin.script(Reply(tool_calls=[send("hello")]), Reply(content="Sent."))
    p = without_terminal(plugin, "chat", "--json", "say hello to the team")
    assert p.returncode == 0, p.stderr
    assert sent(plugin) == "hello\n"


def test_plugins_and_the_web_tools_say_they_are_network_tools(standin, plugin) -> None:
    p = without_terminal({**plugin, "OLLAMA_API_KEY": "k"}, "tools", "list", "--json")
    assert p.returncode == 0, p.stderr
    network = {r["name"]: r["network"] for r in map(json.loads, p.stdout.splitlines())}
    assert network["send_out"] and network["web_fetch"] and network["web_search"]
    assert not network["read_file"]


def test_a_later_turn_that_remembers_a_read_asks_too(standin, plugin) -> None:
    standin.script(Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}]),
                   Reply(content="Read it."))
    assert without_terminal(plugin, "chat", "read the readme").returncode == 0
    standin.script(Reply(tool_calls=[send("the readme")]), Reply(content="Sent."))
    p = without_terminal(plugin, "chat", "-c", "now send it to the team")
    assert p.returncode == 0, p.stderr
    assert sent(plugin) == ""
    assert "needs the user's approval on a terminal" in last_tool_result(standin)


def test_the_question_shows_control_characters_instead_of_sending_them(
        standin, plugin: dict[str, str]) -> None:  # fmt: skip
    """The model picks the arguments the question quotes. json.dumps escapes C0 but not
    C1 (CSI as one character, U+009B) or DEL, which reached the terminal raw: before,
    the question was the one line localgpt wrote to /dev/tty without `visible`."""
    standin.script(Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}]),
                   Reply(tool_calls=[send("x\u009b2K\u009b1Ainnocent\x7f")]),
                   Reply(content="Sent."))
    code, screen = run_in_pty(["chat", "send the readme to the team"], answer=b"n\n",
                              env=plugin, timeout=120)
    assert code == 0, screen
    question = screen.split(b"This turn has read local files.", 1)[1].split(b"[y/N]", 1)[0]
    assert "\u009b".encode() not in question and b"\x7f" not in question, question
    assert b"x<U+009B>2K<U+009B>1Ainnocent^?" in question
    assert sent(plugin) == ""
