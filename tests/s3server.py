"""moto's S3 server on loopback, as the shared-store and fault tests use it.

One process on a fixed port, so that it can be made to hang, die and come back where the
product was pointed (tests/faults.py drives it). moto keeps its objects in memory, so a
killed server comes back empty; `snapshot` and `restore` copy the bucket's objects out
and back in, which stands in for a server whose disk outlives its process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.requires import unavailable

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
UNSET = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT")


def need_moto() -> None:
    """moto[server] comes with the test extra; without it skip, but fail under CI."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        import obstore  # noqa: F401
    except ImportError as exc:
        unavailable(f"moto[server] or obstore is not installed ({exc}): pip install -e '.[test]'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    """moto's server on `port`; its log (one line per request) goes to `log`."""

    def __init__(self, log: Path, port: int | None = None, env: dict[str, str] | None = None):
        self.log = log
        self.port = port or free_port()
        self.env = env or {}  # e.g. INITIAL_NO_AUTH_ACTION_COUNT=0: check credentials
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        if self.proc is not None:  # a restart: the killed server must let go of the port
            self.proc.wait(timeout=30)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=self.log.open("ab"),
            env={**os.environ, **self.env},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert self.proc.poll() is None, "moto's server exited"
                assert time.monotonic() < deadline, "moto's server did not start"
                time.sleep(0.1)

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=ENV["AWS_SECRET_ACCESS_KEY"], region_name=ENV["AWS_REGION"],
        )  # fmt: skip

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket).get("Contents", [])
        return sorted(o["Key"] for o in listed)

    def snapshot(self, bucket: str) -> dict[str, bytes]:
        s3 = self.client()
        return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in self.keys(bucket)}

    def restore(self, bucket: str, objects: dict[str, bytes]) -> None:
        s3 = self.client()
        s3.create_bucket(Bucket=bucket)
        for key, body in objects.items():
            s3.put_object(Bucket=bucket, Key=key, Body=body)


@contextmanager
def serving(log: Path, monkeypatch: pytest.MonkeyPatch, bucket: str) -> Iterator[S3Server]:
    """A started server with `bucket`, and the AWS_* environment that points LanceDB and
    localgpt at it (for this test and the processes it starts)."""
    need_moto()
    server = S3Server(log).start()
    try:
        for var, value in {**ENV, "AWS_ENDPOINT_URL": server.endpoint}.items():
            monkeypatch.setenv(var, value)
        for var in UNSET:
            monkeypatch.delenv(var, raising=False)
        server.client().create_bucket(Bucket=bucket)
        yield server
    finally:
        server.stop()
