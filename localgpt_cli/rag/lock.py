"""The ingest lock: one writer per knowledge base at a time, cron-friendly.

The lock belongs to the store it protects (see sidecar.py): two homes writing one store
must exclude each other, which a lock in each home did not do.

- A store on a local path: `flock` on `<store>/_localgpt/ingest.lock` rather than a PID
  file: the kernel drops the lock when its holder dies (SIGKILL included), so a crashed
  run never leaves a stale lock for the next cron run to trip on. The holder writes its
  pid and host name into the file only so that the refusal can say who holds it.
- An `s3://` store: a lease object with an expiry (lease.py), for the same reason.
- Other object stores: a lock in the home, as before (one home may write them).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from localgpt_cli.errors import LockBusy
from localgpt_cli.rag import sidecar

POLL_SECONDS = 0.1
LOCK_NAME = "ingest.lock"


def lock_path(db_uri: str, home: Path) -> Path:
    """The lock file of a store that `flock` can protect (the home's for other URIs)."""
    return (sidecar.local_dir(db_uri) or home) / LOCK_NAME


@contextlib.contextmanager
def ingest_lock(db_uri: str, home: Path, wait: float = 0.0) -> Iterator[Callable[[], None]]:
    """Hold the store's ingest lock, waiting up to `wait` seconds; LockBusy (exit 75) if
    another run holds it. Yields a check to call before each write: a lease can be lost
    (it raises then), a flock cannot (it does nothing)."""
    where = sidecar.s3_location(db_uri)
    if where is None:
        with file_lock(lock_path(db_uri, home), wait):
            yield _held
        return
    from localgpt_cli.rag.lease import hold_lease
    from localgpt_cli.rag.s3 import S3Client

    bucket, prefix = where
    client = S3Client.from_env(bucket, where=db_uri)
    with hold_lease(client, f"{prefix}/ingest.lease", wait) as check:
        yield check


def _held() -> None:
    """The write check of a flock: held until the process closes it."""


@contextlib.contextmanager
def file_lock(path: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the flock at `path`, waiting up to `wait` seconds; LockBusy (exit 75) if not."""
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
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _holder(fd: int) -> str:
    """' (pid N on HOST)' from the lock file: a shared store may have holders elsewhere.

    The file can still name the run before (the holder writes its pid just after taking
    the lock), so a pid on this host that is no longer running is not named."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        words = os.pread(fd, 300, 0).decode().split()
        pid = int(words[0])
        host = words[1] if len(words) > 1 else None
        if host in (None, socket.gethostname()) and not _running(pid):
            return ""
        return f" (pid {pid} on {host})" if host else f" (pid {pid})"
    return ""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
