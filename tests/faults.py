"""Fault injection for the real components the tests start (PostgreSQL, moto's S3 server,
the llama.cpp server, the stand-ins run as processes): each can be made to hang (SIGSTOP),
resume (SIGCONT), die (SIGKILL) and restart, and a fault test is bounded in time.

A component is any object with `pids()` (the processes that serve it: a PostgreSQL
server has a postmaster and one backend per connection) and `start()`; `Faults` does the
rest, and always resumes what it paused, so a failed test never leaves a stopped process
behind for the next one. Every fault test follows one shape: count what is stored, inject,
run the command under `bounded`, check the exit code, the one-line message and that the
count did not drop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Protocol


class Component(Protocol):
    def pids(self) -> list[int]: ...

    def start(self) -> object: ...


def children(pid: int) -> list[int]:
    """The direct children of `pid` (from /proc), e.g. a postmaster's backends."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


@dataclass
class Faults:
    """Pause, resume, kill and restart one component's processes."""

    component: Component
    paused: list[int] = field(default_factory=list)

    def hang(self, pids: list[int] | None = None) -> None:
        """SIGSTOP: the sockets stay open and nothing answers, as on a stalled server."""
        for pid in pids if pids is not None else self.component.pids():
            os.kill(pid, signal.SIGSTOP)
            self.paused.append(pid)

    def resume(self) -> None:
        for pid in self.paused:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.paused.clear()

    def kill(self, pids: list[int] | None = None) -> None:
        """SIGKILL: connections are cut at once, nothing is flushed or said."""
        for pid in pids if pids is not None else self.component.pids():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def restart(self) -> None:
        self.kill()
        self.resume()
        self.component.start()

    @contextmanager
    def hung(self, pids: list[int] | None = None) -> Iterator[None]:
        self.hang(pids)
        try:
            yield
        finally:
            self.resume()


@dataclass
class Bounded:
    """A finished command run under a deadline: its exit code, streams and duration."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def bounded(command: list[str], deadline: float, *, env: dict[str, str] | None = None,
            input: str = "", cwd: str | None = None) -> Bounded:
    """Run `command`, failing the test (after killing it) if it outlives `deadline`
    plus 10 s, the margin the fault tests allow: a hang is a failure, not a stuck CI."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(input, timeout=deadline + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"{command[3:] if len(command) > 3 else command} still running after "
            f"{deadline + 10:.0f} s (its deadline is {deadline:.0f} s); stderr: {err[-2000:]}"
        ) from None
    return Bounded(proc.returncode, out, err, time.monotonic() - start)
