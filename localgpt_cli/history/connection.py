"""Opening the history's SQLite file, and what SQLite raises turned into our errors.

The file is opened in WAL mode, so `history list` in one terminal never waits for a
`chat` writing in another, with a busy timeout, so two writers queue instead of
failing, and with `synchronous=NORMAL`: a commit is safe against the process dying
(Ctrl-C, kill) and costs no fsync; only a power cut can lose the last commits.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localgpt_cli.errors import InvalidInput, LockBusy
from localgpt_cli.history.preflight import damaged
from localgpt_cli.history.schema import migrate

BUSY_TIMEOUT_MS = 5000


@contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """Turn what SQLite raises for a user's situation into our errors; let bugs through."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        # sqlite_errorname exists from Python 3.11; the message is the fallback.
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
            raise LockBusy(
                f"history database {path} is locked: another localgpt has been writing "
                f"to it for more than {BUSY_TIMEOUT_MS / 1000:g} s.",
                hint="Try again when it has finished.",
            ) from exc
        if (
            name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
            or "malformed" in text
            or "not a database" in text
        ):
            raise damaged(path, f"is damaged ({text})") from exc
        if isinstance(exc, sqlite3.OperationalError):
            # Disk full, read-only file system, permissions, I/O errors.
            raise InvalidInput(f"history database {path} cannot be used: {text}.") from exc
        raise


def connect(path: Path) -> sqlite3.Connection:
    """A configured, migrated connection to `path`, creating it and its folders if needed.

    A new file is created with mode 0600 (and so are its -wal/-shm files): conversations
    are private.
    """
    previous_umask = os.umask(0o077)
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput(
                f"cannot create the folder {path.parent} for the history database: "
                f"{exc.strerror}."
            ) from exc
        with sqlite_errors(path):
            conn = sqlite3.connect(
                path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            try:
                _configure(conn, path)
            except BaseException:
                conn.close()
                raise
    finally:
        os.umask(previous_umask)
    return conn


def _configure(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    migrate(conn, path)
