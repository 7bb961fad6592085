"""The whole-file check before a process's first write, and when it may be skipped.

The header and schema checks of `preflight` cannot see garbage in the pages behind
them, and SQLite happily commits a row to an intact table of a damaged file: a refusal
after that would leave a half-written turn behind a message saying the file was left
unchanged. So before its first write a process runs `PRAGMA quick_check`, which reads
every page: about 3 ms per MB (1.5 s for a million messages, 0.16 s for 100,000).

Paid by every `chat`, that would be most of a heavy user's wait, and it is wasted when
nothing but localgpt has touched the file. So a process that wrote to a checked file
and closes it last (its -wal checkpointed and gone) records the file's identity next to
it, in `history.db-checked`: inode, size, mtime and ctime to the nanosecond. The next
process skips the check when the file still has exactly that identity and no -wal file
holds pages. Anything else that wrote to it in between (another program, a restored
backup, a disk tool, a localgpt killed before it closed) changed its ctime, which no one
can set back, so the check runs again.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from localgpt_cli.history.preflight import damaged

MARKER_SUFFIX = "-checked"


def quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """Raise the `damaged` refusal unless PRAGMA quick_check finds the file whole.

    SQLite reports damage as result rows or, when a page cannot be read at all, as an
    error, which the store's `_sqlite_errors` turns into the same refusal."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise damaged(path, f"is damaged (integrity check: {rows[0][0]})")


def _identity(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\n"


def _side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def left_whole(path: Path) -> bool:
    """Whether the last localgpt that wrote to the checked file left it as it is now.

    Call it before opening a connection, which creates a -wal file of its own."""
    try:
        if _side(path, "-wal").stat().st_size > 0:
            return False  # pages not yet in the file, written by whom we cannot tell
    except OSError:
        pass  # no -wal file
    try:
        recorded = _side(path, MARKER_SUFFIX).read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return recorded == _identity(path)


def mark_whole(path: Path) -> None:
    """Record the identity of a file this process checked (or found left whole) and
    wrote to, once closed. Only the last connection out may: while another one is
    open, its -wal file exists and that process records the file when it closes it.

    A marker that cannot be written costs only the skip: the next process checks."""
    if _side(path, "-wal").exists():
        return
    identity = _identity(path)
    if identity is None:
        return
    marker = _side(path, MARKER_SUFFIX)
    staging = _side(path, f"{MARKER_SUFFIX}.{os.getpid()}")
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(identity)
        os.replace(staging, marker)
    except OSError:
        staging.unlink(missing_ok=True)
