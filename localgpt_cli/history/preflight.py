"""A look at an existing history database before it is opened for writing.

Opening a file read-write lets SQLite put -wal/-shm files next to it and switching it
to WAL rewrites its header; a migration writes tables. None of that may happen to a
file that is not our database, is damaged, or was written by a newer localgpt: the
user must find it exactly as it was. So the file is judged first from its header
bytes, then through a connection that cannot write (and, when no WAL file exists,
that does not even create one).

This is cheap (one header read and one schema read), so it runs on every open. It
does not read every page: the store runs `PRAGMA quick_check` once, before its first
write (see sqlite.py), and a read-only command reports damage when a query meets it.
"""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

from localgpt_cli.errors import InvalidInput
from localgpt_cli.history.schema import APPLICATION_ID, SCHEMA_VERSION, too_new, user_version

_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100


def damaged(path: Path, what: str) -> InvalidInput:
    """The refusal for a file that cannot be our database: the command that moves it aside.

    A -wal file holding pages must move with it: left behind, SQLite would replay it
    into the new history that localgpt starts next."""
    aside = shlex.quote(f"{path}.damaged")
    move = f"mv {shlex.quote(str(path))} {aside}"
    wal = path.with_name(path.name + "-wal")
    try:
        if wal.stat().st_size > 0:
            move += f" && mv {shlex.quote(str(wal))} {aside}-wal"
    except OSError:
        pass  # no -wal file
    return InvalidInput(
        f"history database {path} {what}; it was left unchanged.",
        hint=f"Move it aside ({move}) and localgpt starts a new history, "
        "or restore it from a backup.",
    )


def check_existing(path: Path) -> None:
    """Raise InvalidInput unless `path` is absent, empty, or a history database we can use.

    An empty file counts as a new database (SQLite treats it as one).
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror})") from exc
    if size == 0:
        return
    try:
        with path.open("rb") as f:
            header = f.read(_HEADER_SIZE)
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror})") from exc
    if len(header) < _HEADER_SIZE or not header.startswith(_MAGIC):
        raise damaged(path, "is not a SQLite database")

    wal = path.with_name(path.name + "-wal")
    wal_exists = wal.exists()
    if not (wal_exists and wal.stat().st_size > 0):
        # Without a WAL holding newer pages, the main file alone must be whole.
        _check_size(path, header, size)

    # immutable=1 reads without locks or side files; it is only safe when no other
    # process can be writing, which for a WAL database means no -wal file exists.
    mode = "mode=ro" if wal_exists else "immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True)
    except sqlite3.Error as exc:
        raise damaged(path, f"cannot be opened ({exc})") from exc
    try:
        version = user_version(conn)
        application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        tables = conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise damaged(path, f"is damaged ({exc})") from exc
    finally:
        conn.close()

    if application_id not in (0, APPLICATION_ID) or (version == 0 and tables):
        raise damaged(path, "is a SQLite database of another program")
    if version > SCHEMA_VERSION:
        raise too_new(path, version)


def _check_size(path: Path, header: bytes, size: int) -> None:
    """A truncated file: not a whole number of pages, or fewer pages than its header says."""
    page_size = int.from_bytes(header[16:18], "big")
    if page_size == 1:
        page_size = 65536
    if page_size < 512 or page_size & (page_size - 1):
        raise damaged(path, "is damaged (bad page size in its header)")
    # The page count in the header is only valid when its "version-valid-for" number
    # matches the change counter (older writers did not maintain it).
    pages = int.from_bytes(header[28:32], "big")
    counted = header[24:28] == header[92:96]
    if size % page_size or (counted and pages and size < pages * page_size):
        raise damaged(path, "is damaged (truncated)")
