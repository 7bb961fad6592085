"""`localgpt ARGS` on a real pseudo-terminal, from a chosen folder, answering questions.

What a person's terminal receives is bytes, escape sequences included, so the tests of
what reaches a terminal read the raw bytes of the pty's master side (not a renderer's
string), and type answers the way a person does, after the question is on the screen.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_on_pty(
    args: Sequence[str],
    cwd: Path | str = ROOT,
    answers: Sequence[tuple[bytes, bytes]] = (),
    env: dict[str, str] | None = None,
    stdin_data: bytes | None = None,
    timeout: float = 60,
) -> tuple[int, bytes]:
    """Run `python -m localgpt_cli ARGS` with stdout and stderr on a pty (stdin too, unless
    `stdin_data` is piped in instead); each (prompt, answer) is typed once `prompt` has
    appeared. Returns the exit code and every byte the terminal received."""
    full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100",
                "PYTHONPATH": str(ROOT), **(env or {})}  # fmt: skip
    read_end = None
    if stdin_data is not None:
        read_end, write_end = os.pipe()
    pid, fd = pty.fork()
    if pid == 0:  # child
        if read_end is not None:
            os.dup2(read_end, 0)
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "localgpt_cli", *args], full_env)
    if read_end is not None:
        os.close(read_end)
        os.write(write_end, stdin_data or b"")
        os.close(write_end)
    out, pending = b"", list(answers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child has gone and the terminal is closed
            break
        if not data:
            break
        out += data
        if pending and pending[0][0] in out:
            os.write(fd, pending.pop(0)[1])
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        raise AssertionError(f"localgpt did not finish on the pty in {timeout} s: {out[-500:]!r}")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out
