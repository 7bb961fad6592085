"""The ingest lock: one writer per knowledge base at a time, cron-friendly.

`flock` rather than a PID file: the kernel drops the lock when its holder dies (SIGKILL
included), so a crashed run never leaves a stale lock for the next cron run to trip on.
The holder writes its pid into the file only so that the refusal can say who holds it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from localgpt_cli.errors import LockBusy

POLL_SECONDS = 0.1


def lock_path(home: Path) -> Path:
    return home / "ingest.lock"


@contextlib.contextmanager
def ingest_lock(path: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock at `path`, waiting up to `wait` seconds; LockBusy (exit 75) if not."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"Another ingest{_holder(fd)} is writing this knowledge base "
                        f"(lock {path}).",
                        hint="Nothing was changed. Try again later, or wait for it with "
                        "--wait-lock SECONDS.",
                    ) from None
                time.sleep(POLL_SECONDS)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
