"""The ingest lock of an `s3://` store: a lease object with an expiry.

An object store has no `flock`, and a lock object that its holder must delete would block
every later run forever once a holder dies (a killed cron run, a machine that lost
power). So the lock is a lease: an object written with a conditional put, valid for
LEASE_SECONDS after it was last written, and renewed by its holder well before that.

- acquire: `PUT If-None-Match: *` succeeds only when no lease exists. Otherwise the lease
  is read; if its holder has not renewed it within its TTL it is taken over with
  `PUT If-Match: <its ETag>`, which fails if anyone else renewed or took it first.
- renew: a background thread rewrites it every LEASE_SECONDS/3 with `If-Match` on the
  ETag it last wrote; a 412 there means the lease was taken over (this run stalled past
  its TTL), and the run ends with an error instead of writing beside another writer.
- release: on every exit (an error, Ctrl-C, SIGTERM), `PUT If-Match` of a released
  lease, which the next run takes at once. A run that ended because the store stopped
  answering leaves its lease to expire instead of waiting on the store once more.
- a holder that is gone: a lease names its host, pid and the pid's start time; one whose
  holder no longer runs on this host (killed with SIGKILL) is taken over at once; one
  held on another host only after its expiry.

Age is judged by the server's clock alone (when the server stored a small probe object,
minus the lease's `Last-Modified`), so machines whose clocks disagree agree on expiry.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from localgpt_cli.errors import LocalGPTError, LockBusy
from localgpt_cli.rag.s3 import PreconditionFailed, S3Client, S3Object
from localgpt_cli.rag.store import remote
from localgpt_cli.rag.store.deadline import within

LEASE_SECONDS = 60
POLL_SECONDS = 1.0
# A release is worth a short wait only: a run ended by Ctrl-C must not hang on a slow store.
RELEASE_SECONDS = 5.0


class LeaseLost(LockBusy):
    """The lease expired under this run and another run took it over."""

    code = "lease_lost"


@contextlib.contextmanager
def hold_lease(
    client: S3Client, key: str, wait: float = 0.0, ttl: int = LEASE_SECONDS
) -> Iterator[Callable[[], None]]:
    """Hold the lease at `key` for the block, waiting up to `wait` seconds for it; yields
    a check to call before each write, which raises LeaseLost once the lease is lost."""
    lease = _Lease(client, key, ttl)
    lease.acquire(wait)
    try:
        yield lease.check
    except BaseException as exc:  # Ctrl-C and SIGTERM (KeyboardInterrupt) included
        lease.release(reachable=not remote.is_unreachable(exc))
        raise
    if lease.release():
        lease.check()


class _Lease:
    def __init__(self, client: S3Client, key: str, ttl: int):
        self.client = client
        self.key = key
        self.ttl = ttl
        self.body = _body(ttl)
        self.etag = ""
        self.lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, wait: float) -> None:
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            try:
                self.etag = self.client.put(self.key, self.body, if_none_match=True)
                break
            except PreconditionFailed:
                pass
            current = self.client.get(self.key)
            if current is None:
                continue  # deleted meanwhile: try the conditional create again
            if self._free(current):
                try:
                    self.etag = self.client.put(self.key, self.body, if_match=current.etag)
                    break
                except PreconditionFailed:
                    continue  # renewed or taken by someone else first
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"Another ingest ({self._describe(current)}) is writing this knowledge base "
                    f"(lease s3://{self.client.bucket}/{self.key}).",
                    hint="Nothing was changed. Try again later, or wait for it with "
                    "--wait-lock SECONDS. A lease whose holder died expires by itself.",
                )
            time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.05)))
        self._renewer = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._renewer.start()

    def _free(self, current: S3Object) -> bool:
        """Released, its holder gone from this host, or not renewed within its TTL."""
        fields = _fields(current)
        if fields.get("released") or _holder_gone(fields):
            return True
        ttl = fields.get("ttl")
        limit = ttl if isinstance(ttl, (int, float)) and ttl > 0 else LEASE_SECONDS
        age = self._age(current)
        return age is not None and age > limit

    def _age(self, current: S3Object) -> float | None:
        """Seconds since the lease was last written, by the server's clock."""
        now = self.client.now(f"{self.key}.clock")
        if current.last_modified is None or now is None:
            return None
        return (now - current.last_modified).total_seconds()

    def _describe(self, current: S3Object) -> str:
        holder = _fields(current).get("holder") or "unknown holder"
        age = self._age(current)
        return f"{holder}, renewed {age:.0f} s ago" if age is not None else str(holder)

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(
                f"The ingest lease s3://{self.client.bucket}/{self.key} was not renewed "
                f"within {self.ttl} s and another run may have taken it over.",
                hint="What was committed is kept; run again. A run that stalls this long "
                "(suspended, or cut off from the object store) loses its lease.",
            )

    def _renew(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.ttl / 3):
            try:
                self.etag = self.client.put(self.key, self.body, if_match=self.etag)
                last_ok = time.monotonic()
            except PreconditionFailed:
                self.lost = True
                return
            except Exception:  # the store unreachable for a moment: try at the next tick
                if time.monotonic() - last_ok > self.ttl:
                    self.lost = True
                    return

    def release(self, reachable: bool = True) -> bool:
        """Stop renewing and mark the lease released if it is still ours (a conditional
        put: a lease taken over is left alone); True if it was lost. Without `reachable`
        (the store stopped answering) it is left to expire."""
        self._stop.set()
        if self._renewer is not None and reachable:  # a renewal waits one request at most
            self._renewer.join(remote.REQUEST_TIMEOUT_SECONDS + 1)
        if reachable and not self.lost and not (self._renewer and self._renewer.is_alive()):
            body = _body(0, released=True)
            with contextlib.suppress(PreconditionFailed, LocalGPTError):  # else it expires
                within(lambda: self.client.put(self.key, body, if_match=self.etag),
                       self.client.uri(self.key), RELEASE_SECONDS)  # fmt: skip
        self.client.close()
        return self.lost


def _body(ttl: int, released: bool = False) -> bytes:
    import orjson

    host, pid = socket.gethostname(), os.getpid()
    return orjson.dumps(
        {
            "holder": f"{host} pid {pid}",
            "host": host,
            "pid": pid,
            "started": _started(pid),
            "ttl": ttl,
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **({"released": True} if released else {}),
        }
    )


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), so that a pid reused by
    another process does not pass for the holder; None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _holder_gone(fields: dict[str, object]) -> bool:
    """The lease's holder ran on this host and runs no more (a SIGKILL, a crash)."""
    pid = fields.get("pid")
    if fields.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: it runs
    started = fields.get("started")
    return started is not None and started != _started(pid)


def _fields(current: S3Object) -> dict[str, object]:
    import orjson

    try:
        obj = orjson.loads(current.body)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}
