"""A Ray head on loopback for the Ray engine's tests: `ray start --head --block` with 2 CPUs,
our child, in a session of its own, so that it can crash and come back where the product
was pointed.

A crash is played as the kernel's OOM killer or a power cut on a one-machine cluster would
play it: every process of the head (the `ray start` process, the GCS, the raylet, the
agents, the workers and actors) is SIGKILLed at once, nothing is flushed or said
(`Faults(head).kill()`, tests/faults.py). `start()` then starts a new head at the same
address, as a user or systemd would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from tests.cli import ROOT
from tests.faults import children
from tests.s3server import free_port

# The test cluster and its clients: no token (Ray's default makes one in ~/.ray, which a
# user's cluster keeps).
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}
START_SECONDS = 120


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _session(pid: int) -> int | None:
    """The session of a live process (None once it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in "ZX" else int(fields[3])


class RayHead:
    """The head at `address`; `proc` is the current `ray start --block` process."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        """A head at `address`, back once its raylet runs (~19 s on 2 loaded cores)."""
        ray = str(Path(sys.executable).parent / "ray")
        env = {**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV}
        self.starts += 1
        log = (self.log_dir / f"head{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
             f"--port={self.port}", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while not any("raylet" in cmdline(p) for p in children(self.proc.pid)):
            assert self.proc.poll() is None, f"ray start failed: see {log.name}"
            assert time.monotonic() < deadline, f"no raylet after {START_SECONDS} s"
            time.sleep(0.5)

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """Every live process of the head: its session, and what descends from it."""
        if self.proc is None:
            return []
        found = {int(p) for p in os.listdir("/proc") if p.isdigit()}
        found = {p for p in found if _session(p) == self.proc.pid}
        stack = [self.proc.pid]
        while stack:
            for pid in children(stack.pop()):
                stack.append(pid)
                found.add(pid)
        return sorted(p for p in found if _session(p) is not None)

    def gone(self, seconds: float = 30) -> None:
        """Wait until none of the head's processes is left (the killed ones reaped)."""
        deadline = time.monotonic() + seconds
        if self.proc is not None:
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=seconds)
        while left := self.pids():
            assert time.monotonic() < deadline, f"the head's processes outlived it: {left}"
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to what is left after a few seconds: a head that ran jobs
        drains for up to 30 s first (Ray 2.60), which a test cluster need not."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for pid in self.pids():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.gone()
