"""`localgpt chat` as a real process: signals, TTY detection, start-up imports."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.cli import ROOT, run_in_pty, validate_packets
from tests.standin import Reply


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "localgpt_cli", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=os.environ.copy(), cwd=ROOT,
    )


def _read_until_token(proc: subprocess.Popen, timeout: float = 20) -> list[bytes]:
    lines: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if b'"token"' in line:
            return lines
    raise AssertionError(f"no token arrived: {lines!r}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_stream_closes_the_request_and_ends_with_done_aborted(standin, sig):
    standin.script(Reply(content=["first "] + ["more "] * 200, delay=0.05))
    proc = _spawn("chat", "--json", "q")
    head = _read_until_token(proc)
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    packets = [json.loads(x) for x in head + rest.splitlines()]
    validate_packets(packets)
    assert packets[-1]["payload"]["reason"] == "aborted"
    assert packets[0]["payload"] == "first "
    assert standin.wait_for_disconnects(1, timeout=5), "the stream was not closed"
    assert b"Traceback" not in err


def test_plain_mode_in_a_pipe_has_no_ansi_and_answer_only(standin):
    standin.script(Reply(thinking="ponder", content="**bold** answer"), model="qwen3")
    proc = subprocess.run([sys.executable, "-m", "localgpt_cli", "chat", "-m", "qwen3", "q"],
                          capture_output=True, env=os.environ.copy(), cwd=ROOT, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0
    assert proc.stdout == b"**bold** answer\n"
    assert b"\x1b[" not in proc.stdout


def test_a_terminal_gets_rendered_markdown(standin):
    standin.script(Reply(content="# Title\n\nSome **bold** text."))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    _, screen = run_in_pty(["chat", "q"], env=env)
    assert b"Title" in screen and b"bold" in screen
    assert b"**bold**" not in screen  # rendered, not raw markdown
    assert b"\x1b[" in screen  # styled


def test_no_color_on_a_terminal_has_no_colour_codes(standin):
    standin.script(Reply(content="plain *words*"))
    env = {**os.environ, "TERM": "xterm-256color", "NO_COLOR": "1"}
    _, screen = run_in_pty(["chat", "q"], env=env)
    assert b"words" in screen
    # No foreground or background colour (SGR 30-38, 40-48); italic/bold are allowed.
    assert not re.search(rb"\x1b\[(?:\d+;)*[34][0-8](?:;\d+)*m", screen), screen


def test_help_imports_nothing_heavy():
    code = (
        "import sys; from localgpt_cli.cli.main import cli\n"
        "try:\n    cli.main(['--help'], standalone_mode=False)\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('ollama', 'httpx', 'lancedb', 'pyarrow', 'rich', 'pypdf', "
        "'pypdfium2', 'PIL', "
        "'numpy', 'orjson', 'pydantic', 'prompt_toolkit', 'jsonschema') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout, out.stdout
