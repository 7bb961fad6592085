"""NDJSON on stdout: one object per line, UTF-8, flushed per line.

orjson writes bytes, so packets go to the binary stream directly; flushing each line is
what lets `localgpt chat --json | jq` show tokens as they arrive.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

import orjson

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
# U+0080-U+009F in UTF-8 (0xC2 is never a continuation byte, so this matches nothing else)
_C1 = re.compile(b"\xc2([\x80-\x9f])")


def dumps(obj: Any) -> bytes:
    """One NDJSON line (with its newline); non-JSON values are written as strings. orjson
    escapes C0 controls but writes C1 ones raw, which some terminals obey (U+009B is a
    CSI): they are escaped too, `\\u009b`, the same JSON text."""
    line = orjson.dumps(obj, default=str, option=_OPTIONS)
    return _C1.sub(lambda m: b"\\u%04x" % m[1][0], line) if b"\xc2" in line else line


class NDJSONWriter:
    """Writes records or packets, one line each."""

    def __init__(self, stream: IO[bytes] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout.buffer

    def write(self, obj: Any) -> None:
        self.stream.write(dumps(obj))
        self.stream.flush()
