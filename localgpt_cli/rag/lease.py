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
- release: `DELETE If-Match` on the last ETag.

Age is judged by the server's clock alone (the response's `Date` minus the object's
`Last-Modified`), so machines whose clocks disagree still agree on expiry.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from localgpt_cli.errors import LockBusy
from localgpt_cli.rag.s3 import PreconditionFailed, S3Client, S3Object

LEASE_SECONDS = 60
POLL_SECONDS = 1.0


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
    finally:
        lost = lease.release()
    if lost:
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
                continue  # released meanwhile: try the conditional create again
            if _expired(current):
                try:
                    self.etag = self.client.put(self.key, self.body, if_match=current.etag)
                    break
                except PreconditionFailed:
                    continue  # renewed or taken by someone else first
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"Another ingest ({_describe(current)}) is writing this knowledge base "
                    f"(lease s3://{self.client.bucket}/{self.key}).",
                    hint="Nothing was changed. Try again later, or wait for it with "
                    "--wait-lock SECONDS. A lease whose holder died expires by itself.",
                )
            time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.05)))
        self._renewer = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._renewer.start()

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

    def release(self) -> bool:
        """Stop renewing and delete the lease if it is still ours; True if it was lost."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self.lost:
            with contextlib.suppress(PreconditionFailed):
                self.client.delete(self.key, if_match=self.etag)
        self.client.close()
        return self.lost


def _body(ttl: int) -> bytes:
    import orjson

    return orjson.dumps(
        {
            "holder": f"{socket.gethostname()} pid {os.getpid()}",
            "ttl": ttl,
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )


def _fields(current: S3Object) -> dict[str, object]:
    import orjson

    try:
        obj = orjson.loads(current.body)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _age(current: S3Object) -> float | None:
    if current.last_modified is None or current.server_time is None:
        return None
    return (current.server_time - current.last_modified).total_seconds()


def _expired(current: S3Object) -> bool:
    """A lease not rewritten within its TTL (by the server's clock); an unreadable one
    counts as written with the default TTL."""
    ttl = _fields(current).get("ttl")
    limit = ttl if isinstance(ttl, (int, float)) and ttl > 0 else LEASE_SECONDS
    age = _age(current)
    return age is not None and age > limit


def _describe(current: S3Object) -> str:
    holder = _fields(current).get("holder") or "unknown holder"
    age = _age(current)
    return f"{holder}, renewed {age:.0f} s ago" if age is not None else str(holder)
