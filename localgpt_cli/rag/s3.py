"""A minimal S3 client: get, put and delete of small objects, with conditional requests.

Why not LanceDB's or pyarrow's S3 support: neither exposes conditional writes
(`If-None-Match: *`, `If-Match: ETAG`), and the ingest lease (lease.py) is only safe with
them. Why not boto3: it would be a 15 MB dependency for three requests. So this signs its
requests with AWS Signature Version 4 over httpx, which the product already has (the
`ollama` client is built on it).

It is configured from the same environment LanceDB reads for an `s3://` URI, so one set
of variables points both at the same bucket: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN` (or the shared credentials file, `AWS_PROFILE`), `AWS_REGION` /
`AWS_DEFAULT_REGION`, and `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` / `AWS_ENDPOINT` for
an S3-compatible server (addressed path-style, as LanceDB does for a custom endpoint).
"""

from __future__ import annotations

import configparser
import hashlib
import hmac
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from localgpt_cli.errors import InvalidInput

TIMEOUT_SECONDS = 30.0
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class PreconditionFailed(Exception):
    """The object's state was not the one a conditional request required (412/409)."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None


@dataclass(frozen=True)
class S3Object:
    """An object as read: its bytes, its ETag and the times that judge a lease's age."""

    body: bytes
    etag: str
    last_modified: datetime | None  # by the server's clock
    server_time: datetime | None  # the response's Date: the server's clock, now


def split_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> (`bucket`, `some/prefix`)."""
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


class S3Client:
    """Requests to one bucket, signed with SigV4."""

    def __init__(self, bucket: str, endpoint: str, region: str, credentials: Credentials):
        self.bucket = bucket
        self.endpoint = endpoint.rstrip("/")
        self.region = region
        self.credentials = credentials
        self._http: Any = None

    @classmethod
    def from_env(cls, bucket: str) -> S3Client:
        env = os.environ
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        endpoint = (
            env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL")
            or env.get("AWS_ENDPOINT")
            or f"https://s3.{region}.amazonaws.com"
        )
        credentials = _env_credentials() or _file_credentials()
        if credentials is None:
            raise InvalidInput(
                f"No AWS credentials for s3://{bucket}: the ingest lease is written with "
                "them.",
                hint="Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE with "
                "~/.aws/credentials), as for LanceDB.",
            )
        return cls(bucket, endpoint, region, credentials)

    def url(self, key: str) -> str:
        return f"{self.endpoint}/{quote(self.bucket, safe='')}/{quote(key, safe='/-_.~')}"

    def get(self, key: str) -> S3Object | None:
        """The object at `key`, or None when there is none."""
        response = self._request("GET", key)
        if response.status_code == 404:
            return None
        self._check(response, "read", key)
        return S3Object(
            response.content,
            response.headers.get("etag", ""),
            _http_date(response.headers.get("last-modified")),
            _http_date(response.headers.get("date")),
        )

    def put(
        self, key: str, body: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write `body` at `key`; returns the new ETag. With `if_none_match` only if no
        object is there, with `if_match` only if the object still has that ETag;
        PreconditionFailed otherwise."""
        headers = {}
        if if_none_match:
            headers["if-none-match"] = "*"
        if if_match is not None:
            headers["if-match"] = if_match
        response = self._request("PUT", key, body, headers)
        if response.status_code in (409, 412):
            raise PreconditionFailed(key)
        self._check(response, "write", key)
        return str(response.headers.get("etag", ""))

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete `key` (a missing object is not an error); with `if_match`, only while
        the object has that ETag (PreconditionFailed otherwise)."""
        headers = {"if-match": if_match} if if_match is not None else {}
        response = self._request("DELETE", key, b"", headers)
        if response.status_code in (409, 412):
            raise PreconditionFailed(key)
        if response.status_code != 404:
            self._check(response, "delete", key)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _request(
        self, method: str, key: str, body: bytes = b"", extra: dict[str, str] | None = None
    ) -> Any:
        import httpx

        if self._http is None:
            self._http = httpx.Client(timeout=TIMEOUT_SECONDS)
        url = self.url(key)
        headers = sign(
            method, url, {**(extra or {})}, body, self.credentials, self.region,
            datetime.now(timezone.utc),
        )  # fmt: skip
        try:
            return self._http.request(method, url, content=body or None, headers=headers)
        except httpx.HTTPError as exc:
            raise InvalidInput(
                f"Cannot reach the object store at {self.endpoint} for s3://{self.bucket}: "
                f"{exc}",
                hint="Check AWS_ENDPOINT_URL / AWS_REGION and the network.",
            ) from exc

    def _check(self, response: Any, what: str, key: str) -> None:
        if response.status_code < 300:
            return
        reason = _error_code(response.text) or f"HTTP {response.status_code}"
        raise InvalidInput(
            f"Cannot {what} s3://{self.bucket}/{key}: {reason}.",
            hint="Check the bucket, the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE) and "
            "their permissions.",
        )


def sign(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    now: datetime,
) -> dict[str, str]:
    """`headers` plus the SigV4 ones (host, x-amz-date, x-amz-content-sha256, token,
    Authorization) for an S3 request; every header given is signed."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
    signed = {k.lower(): v.strip() for k, v in headers.items()}
    signed["host"] = parts.netloc
    signed["x-amz-date"] = amz_date
    signed["x-amz-content-sha256"] = payload
    if credentials.token:
        signed["x-amz-security-token"] = credentials.token
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            parts.path or "/",
            _canonical_query(parts.query),
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            payload,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{credentials.secret_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed


def _canonical_query(query: str) -> str:
    pairs = sorted(tuple(p.split("=", 1)) if "=" in p else (p, "") for p in query.split("&") if p)
    return "&".join(f"{k}={v}" for k, v in pairs)


def _env_credentials() -> Credentials | None:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, os.environ.get("AWS_SESSION_TOKEN") or None)
    return None


def _file_credentials() -> Credentials | None:
    """The profile's keys in the shared credentials file (`AWS_PROFILE`, else default)."""
    path = Path(
        os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or Path.home() / ".aws" / "credentials"
    )
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return None
    profile = os.environ.get("AWS_PROFILE") or "default"
    if not parser.has_section(profile):
        return None
    section = parser[profile]
    key, secret = section.get("aws_access_key_id"), section.get("aws_secret_access_key")
    if not (key and secret):
        return None
    return Credentials(key, secret, section.get("aws_session_token") or None)


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None


def _error_code(text: str) -> str | None:
    """The `<Code>` of an S3 error document (AccessDenied, NoSuchBucket, ...)."""
    start = text.find("<Code>")
    end = text.find("</Code>", start)
    return text[start + 6 : end] if start >= 0 and end > start else None
