"""Helpers to drive the CLI: in process with CliRunner, or as a real subprocess."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from localgpt_cli.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "localgpt_cli" / "kernel" / "stream_packet.schema.json").read_text())


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def invoke(*args: str, input: str | None = None) -> Result:
    """Run `localgpt ARGS` in process through the real entry point (exit-code mapping
    included); CliRunner captures the streams, and its stdin is not a TTY."""
    runner = CliRunner()
    with runner.isolation(input=input or "") as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return Result(code, out.getvalue().decode(), err.getvalue().decode())


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 60) -> Result:
    """Run `python -m localgpt_cli ARGS` as a real process with the current environment."""
    p = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", *args],
        input=input if input is not None else "",
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=ROOT,
    )
    return Result(p.returncode, p.stdout, p.stderr)


def run_with_stdin_closed(*args: str) -> Result:
    """`localgpt ARGS <&-`: a real process started with file descriptor 0 closed."""
    p = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=ROOT,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    return Result(p.returncode, p.stdout, p.stderr)


def validate_packets(lines: list[dict[str, Any]]) -> None:
    """Every packet matches the shipped schema, ids count from 0, one done, last."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    for packet in lines:
        validator.validate(packet)
    seqs = [int(p["id"].rsplit(":", 1)[1]) for p in lines]
    assert seqs == list(range(len(lines)))
    assert [p["type"] for p in lines].count("done") == 1
    assert lines[-1]["type"] == "done"


def run_in_pty(
    args: list[str], answer: bytes = b"", env: dict[str, str] | None = None, timeout: float = 30
) -> tuple[int, bytes]:
    """`localgpt ARGS` on a terminal (stdin and stdout); `answer` is typed at the first
    `[y/N]`. Returns the exit code and everything the terminal showed."""
    if env is None:
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
        env.pop("NO_COLOR", None)
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "localgpt_cli", *args], env)
    out, typed = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
        if answer and not typed and b"[y/N]" in out:
            os.write(fd, answer)
            typed = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out
