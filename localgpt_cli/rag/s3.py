"""Small objects in an S3 bucket (the ingest lease and the manifest), through obstore.

obstore wraps the Rust `object_store` crate LanceDB itself reaches S3 with, so the lease
and the manifest use the store's own credential chain (environment, web identity,
container and instance credentials), its timeouts and its retries, and its conditional
puts: create-only (`If-None-Match: *`) and update-if-ETag (`If-Match`), which the lease
is only safe with. The deadlines are those of the tables' requests (remote.py), so a
hung server ends the lease's requests as soon as the tables'.

It reads the same environment LanceDB reads for an `s3://` URI (`AWS_ACCESS_KEY_ID`,
`AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, …); keys in the shared credentials
file (`AWS_PROFILE`) are read here too, as LanceDB does.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.store import remote


class PreconditionFailed(Exception):
    """The object's state was not the one a conditional request required (412)."""


@dataclass(frozen=True)
class S3Object:
    """An object as read: its bytes, its ETag and when the server last wrote it."""

    body: bytes
    etag: str
    last_modified: datetime | None  # by the server's clock


def split_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> (`bucket`, `some/prefix`)."""
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


class S3Client:
    """Requests to one bucket; every failure is one of localgpt's errors (remote.py)."""

    def __init__(self, bucket: str, store: Any, where: str | None = None):
        self.bucket = bucket
        self.store = store
        self.where = where  # the store's URI, which errors name (else the object's)

    @classmethod
    def from_env(cls, bucket: str, where: str | None = None) -> S3Client:
        """A client of `bucket` configured as LanceDB is for the store `where`."""
        try:
            from obstore.store import S3Store
        except ImportError:
            raise InvalidInput(
                f"A knowledge base on S3 ({where or 's3://' + bucket}) needs the [s3] extra.",
                code="missing_extra",
                hint="Install it: pip install -e '.[s3]' (in the localgpt source folder).",
            ) from None

        config: Any = _file_credentials() if not os.environ.get("AWS_ACCESS_KEY_ID") else {}
        store = S3Store(
            bucket,
            config=config or None,
            client_options=remote.client_options(),
            retry_config=remote.retry_config(),
        )
        return cls(bucket, store, where)

    def uri(self, key: str) -> str:
        return self.where or f"s3://{self.bucket}/{key}"

    def get(self, key: str) -> S3Object | None:
        """The object at `key`, or None when there is none."""
        import obstore

        try:
            found = obstore.get(self.store, key)
            body = bytes(found.bytes())
        except FileNotFoundError as exc:
            if "NoSuchBucket" in str(exc):
                raise remote.store_error(exc, self.uri(key)) from None
            return None
        except Exception as exc:
            raise remote.store_error(exc, self.uri(key)) from None
        meta = found.meta
        return S3Object(body, meta.get("e_tag") or "", meta.get("last_modified"))

    def put(
        self, key: str, body: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write `body` at `key`; returns the new ETag. With `if_none_match` only if no
        object is there, with `if_match` only if the object still has that ETag;
        PreconditionFailed otherwise."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        mode: Any = "overwrite"
        if if_none_match:
            mode = "create"
        elif if_match is not None:
            mode = {"e_tag": if_match}
        try:
            result = obstore.put(self.store, key, body, mode=mode)
        except (AlreadyExistsError, PreconditionError):
            raise PreconditionFailed(key) from None
        except Exception as exc:
            raise remote.store_error(exc, self.uri(key)) from None
        return str(result.get("e_tag") or "")

    def delete(self, key: str) -> None:
        """Delete `key` (a missing object is not an error)."""
        import obstore

        try:
            obstore.delete(self.store, key)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise remote.store_error(exc, self.uri(key)) from None

    def now(self, key: str) -> datetime | None:
        """The server's clock, now: when it stored a small object written at `key` (S3
        answers say nothing else of its time that obstore hands back)."""
        import obstore

        try:
            obstore.put(self.store, key, b"clock")
            return obstore.head(self.store, key).get("last_modified")
        except Exception as exc:
            raise remote.store_error(exc, self.uri(key)) from None

    def close(self) -> None:
        """Nothing to close: the store's connections end with it."""


def _file_credentials() -> dict[str, str]:
    """The profile's keys in the shared credentials file (`AWS_PROFILE`, else default)."""
    path = Path(
        os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or Path.home() / ".aws" / "credentials"
    )
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return {}
    profile = os.environ.get("AWS_PROFILE") or "default"
    if not parser.has_section(profile):
        return {}
    section = parser[profile]
    names = {
        "aws_access_key_id": "access_key_id",
        "aws_secret_access_key": "secret_access_key",
        "aws_session_token": "token",
    }
    return {ours: section[theirs] for theirs, ours in names.items() if section.get(theirs)}
