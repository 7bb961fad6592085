"""A stand-in server run as its own process (`python -m tests.standin` or
`python -m tests.openai_standin`), as a component tests/faults.py can hang, kill and
restart: restarted on the same port, so the profile that points at it stays right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Served:
    """`python -m MODULE ARGS --port P`; `url` is what it printed on its first line."""

    def __init__(self, module: str, *args: str) -> None:
        self.module = module
        self.args = list(args)
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Served:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args, "--port", str(self.port)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True, cwd=str(ROOT))  # fmt: skip
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), f"{self.module} did not start"
        self.port = int(self.url.split(":")[2].split("/")[0])
        return self

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
