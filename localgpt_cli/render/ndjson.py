"""NDJSON on stdout: one object per line, UTF-8, flushed per line.

orjson writes bytes, so packets go to the binary stream directly; flushing each line is
what lets `localgpt chat --json | jq` show tokens as they arrive.
"""

from __future__ import annotations

import sys
from typing import IO, Any

import orjson

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    """One NDJSON line (with its newline); non-JSON values are written as strings."""
    return orjson.dumps(obj, default=str, option=_OPTIONS)


class NDJSONWriter:
    """Writes records or packets, one line each."""

    def __init__(self, stream: IO[bytes] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout.buffer

    def write(self, obj: Any) -> None:
        self.stream.write(dumps(obj))
        self.stream.flush()
