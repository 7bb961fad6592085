"""Deadlines for an object store, and what its failures mean to the user.

A hung S3 server (its process stopped, a network that drops packets) answers nothing and
closes nothing: without a deadline `ingest` waited in LanceDB for as long as it was let.
So every request to an object store, LanceDB's and the lease's alike, has a connect
deadline and a per-request deadline, and is retried a few times with backoff inside a
total limit (the `object_store` crate's own retry, which both go through). What then
fails is said in one line naming the store, with the exit code of its kind: a store that
does not answer or dropped the connection is exit 3 and retryable; a missing bucket is a
setting (6); refused credentials are 77.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from localgpt_cli.errors import AuthFailed, InvalidInput, LocalGPTError, StoreUnreachable
from localgpt_cli.rag.store.uri import local_path

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

CONNECT_TIMEOUT_SECONDS = 5
REQUEST_TIMEOUT_SECONDS = 10
MAX_RETRIES = 2
RETRY_TIMEOUT_SECONDS = 20

# Words in the Rust errors (object_store, reqwest, hyper) of a request that got no answer.
_UNREACHABLE = (
    "error sending request", "timed out", "kind: Timeout", "Connection refused",
    "connection closed", "connection reset", "Connection reset", "IncompleteMessage",
    "dns error", "tcp connect", "broken pipe", "operation timed out",
)  # fmt: skip
_REFUSED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
            "InvalidToken", "403 Forbidden")  # fmt: skip


def is_remote(uri: str) -> bool:
    return local_path(uri) is None


def storage_options(uri: str) -> dict[str, str]:
    """LanceDB's options for the store at `uri`: the deadlines above (none for a folder)."""
    if not is_remote(uri):
        return {}
    return {
        "connect_timeout": f"{CONNECT_TIMEOUT_SECONDS}s",
        "timeout": f"{REQUEST_TIMEOUT_SECONDS}s",
        "client_max_retries": str(MAX_RETRIES),
        "client_retry_timeout": str(RETRY_TIMEOUT_SECONDS),
    }


def client_options() -> ClientConfig:
    """obstore's client options: the same deadlines as LanceDB's requests, and plain
    HTTP when `AWS_ALLOW_HTTP` allows it (given options replace those read from the
    environment, so it is passed on here)."""
    allow_http = os.environ.get("AWS_ALLOW_HTTP", "").strip().lower() in ("1", "true", "yes")
    return {
        "connect_timeout": timedelta(seconds=CONNECT_TIMEOUT_SECONDS),
        "timeout": timedelta(seconds=REQUEST_TIMEOUT_SECONDS),
        "allow_http": allow_http,
    }


def retry_config() -> RetryConfig:
    return {"max_retries": MAX_RETRIES, "retry_timeout": timedelta(seconds=RETRY_TIMEOUT_SECONDS)}


def store_error(exc: BaseException, uri: str) -> LocalGPTError:
    """The one-line error for a failed request to the store at `uri`."""
    text = str(exc)
    if "NoSuchBucket" in text:
        bucket = uri.split("://", 1)[-1].split("/", 1)[0]
        return InvalidInput(
            f"bucket {bucket} does not exist: {uri}",
            hint="Create the bucket, or check --db / LOCALGPT_DB and AWS_ENDPOINT_URL.",
        )
    refused = next((word for word in _REFUSED if word in text), None)
    if refused is not None or type(exc).__name__ in ("PermissionDeniedError",
                                                     "UnauthenticatedError"):  # fmt: skip
        return AuthFailed(
            f"{uri} refused the credentials ({refused or type(exc).__name__}).",
            hint="Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the "
            "bucket's permissions. Nothing was changed.",
        )
    if is_unreachable(exc):
        return StoreUnreachable(
            f"{uri} is not responding (no answer within {REQUEST_TIMEOUT_SECONDS} s, "
            f"{MAX_RETRIES} retries, or the connection was lost).",
            hint="What was committed is kept; run again once the object store answers.",
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return InvalidInput(
        f"{uri}: {first[:200]}",
        hint="Check --db / LOCALGPT_DB, the bucket and the AWS_* settings.",
    )


def is_unreachable(exc: BaseException) -> bool:
    """A request that got no answer (timed out, refused, cut), not one that was refused."""
    if isinstance(exc, (TimeoutError, ConnectionError, StoreUnreachable)):
        return True
    text = str(exc)
    return any(word in text for word in _UNREACHABLE)


def is_store_failure(exc: BaseException) -> bool:
    """A LanceDB error that is about the object store (IO), not about our data."""
    text = str(exc)
    return any(
        mark in text for mark in ("S3 error", "LanceError(IO)", "IO {", "object_store", "Generic")
    ) or is_unreachable(exc)


@contextmanager
def translated(uri: str) -> Iterator[None]:
    """Turn a failure of the object store at `uri` that LanceDB raised (RuntimeError,
    ValueError, OSError with a Rust error's text) into its one-line error."""
    try:
        yield
    except LocalGPTError:
        raise
    except Exception as exc:
        if is_remote(uri) and is_store_failure(exc):
            raise store_error(exc, uri) from exc
        raise
