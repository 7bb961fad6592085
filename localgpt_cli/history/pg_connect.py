"""Connecting to the PostgreSQL history, every wait bounded, and psycopg's errors as ours.

A server that stalls must not hang `chat`, so nothing here waits without a limit:
- connecting: `connect_timeout` (CONNECT_TIMEOUT s, the whole handshake);
- on the server, per session: `lock_timeout` (LOCK_TIMEOUT_MS: a table or row held by
  another session) and `statement_timeout` (STATEMENT_TIMEOUT_MS), both overridable in
  the URL (`?options=-c%20lock_timeout%3D2s`), whose settings come last and win;
- on this side, for a server that stops answering altogether (SIGSTOPped, a cable
  pulled): every wait on the socket ends after the session's statement_timeout plus
  CLIENT_MARGIN s (`BoundedConnection`); TCP keepalives and tcp_user_timeout drop a
  connection to a peer that is gone.
A lock or statement timeout is "busy" (LockBusy, exit 75), anything else that cuts the
conversation with the server "unreachable" (exit 3), a missing database a setting
(exit 6, naming it), refused credentials exit 77; each one line naming the server by
`masked(url)` (postgres.py), never with its password. psycopg is imported here, so
this module is imported only once a PostgreSQL URL is opened.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from localgpt_cli.errors import AuthFailed, InvalidInput, LocalGPTError, LockBusy, OllamaUnreachable

# psycopg logs what it could not clean up after a failure (a rollback on a dead
# connection) as a warning, which Python would print on stderr: the error that follows
# says what happened, in one line.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

CONNECT_TIMEOUT = 10  # seconds: an unreachable server is reported, not waited for
LOCK_TIMEOUT_MS = 10_000  # another session's lock: what two writers queue for at most
STATEMENT_TIMEOUT_MS = 30_000  # one statement on the server
CLIENT_MARGIN = 5.0  # seconds past statement_timeout before this side gives up
_HINT = "Check history.url (or LOCALGPT_HISTORY_URL) and that the server is running."


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait on the server ends after `deadline` s
    (psycopg's own wait timeout; the cursors wait through their connection)."""

    deadline: float = STATEMENT_TIMEOUT_MS / 1000 + CLIENT_MARGIN

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        try:
            return super().wait(gen, interval, self.deadline if timeout is None else timeout)
        except psycopg.OperationalError as exc:
            if _timed_out(exc):  # a query still in flight: the connection is spent
                self.pgconn.finish()
            raise


def connect(url: str, *, patient: bool = False) -> BoundedConnection:
    """An autocommit connection with the limits of the module docstring; `patient`: a
    server that refuses (restarting) is tried again for up to CONNECT_TIMEOUT s."""
    give_up = time.monotonic() + CONNECT_TIMEOUT
    while True:
        try:
            return _connect(url)
        except psycopg.OperationalError as exc:
            refused = isinstance(translate(exc, "", 0), OllamaUnreachable)
            if not patient or not refused or _timed_out(exc) or time.monotonic() > give_up:
                raise
            time.sleep(0.5)


def _connect(url: str) -> BoundedConnection:
    user_options = conninfo_to_dict(url).get("options") or ""
    conn = BoundedConnection.connect(
        url, autocommit=True, connect_timeout=CONNECT_TIMEOUT, application_name="localgpt",
        keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3,
        tcp_user_timeout=int((STATEMENT_TIMEOUT_MS / 1000 + CLIENT_MARGIN) * 1000),
        options=f"-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS}"
                f" {user_options}".strip(),
    )  # fmt: skip
    try:
        row = conn.execute(
            "SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'").fetchone()
        limit = row[0] if row else 0
    except BaseException:
        conn.close()
        raise
    conn.deadline = (limit / 1000 if limit else STATEMENT_TIMEOUT_MS / 1000) + CLIENT_MARGIN
    return conn


def lost(exc: BaseException) -> bool:
    """Whether `exc` cut the connection (a restart, a killed backend): worth one reconnect.
    A wait that timed out is not: the server is there and not answering."""
    if isinstance(exc, LocalGPTError):
        exc = exc.__cause__ or exc
    if not isinstance(exc, psycopg.OperationalError) or _timed_out(exc):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    return not state or state.startswith(("08", "57P"))


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, getattr(psycopg.errors, "_WaitTimeout", ()))


def translate(exc: Exception, where: str, deadline: float) -> LocalGPTError | None:
    """What psycopg raised for a user's situation, as our error; None for a bug."""
    text = " ".join(str(exc).split())
    state = getattr(exc, "sqlstate", None) or ""
    missing = re.search(r'database "([^"]*)" does not exist', text)
    if state.startswith("28") or "authentication failed" in text or "no password" in text:
        return AuthFailed(f"the history server {where} refused the credentials: {text}",
                          hint="Check the user and password in history.url or PGPASSWORD.")
    if state == "3D000" or missing:
        name = missing.group(1) if missing else urlsplit(where).path.lstrip("/")
        return InvalidInput(f"the history server {where} has no database {name!r}.",
                            hint="Create it (createdb) or correct history.url.")
    if state == "55P03" or (state == "57014" and "statement timeout" in text):
        what = ("another session held a lock this needs past lock_timeout" if state == "55P03"
                else "a statement ran past statement_timeout")
        return LockBusy(f"the history server {where} is busy: {what}.",
                        code="history_busy", hint="Try again when the other session is done.")
    if _timed_out(exc):
        return OllamaUnreachable(f"the history server {where} did not answer within "
                                 f"{deadline:g} s.", code="history_unreachable", hint=_HINT)
    if isinstance(exc, psycopg.OperationalError):
        return OllamaUnreachable(f"the history server {where} is not reachable: {text}",
                                 code="history_unreachable", hint=_HINT)
    if isinstance(exc, psycopg.DataError):
        return InvalidInput(f"the history server {where} cannot store this: {text}")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return AuthFailed(f"the history server {where} refused: {text}")
    return None


@contextmanager
def pg_errors(where: str, deadline: float = CONNECT_TIMEOUT) -> Iterator[None]:
    """psycopg's errors for a user's situation raised as ours (the cause kept)."""
    try:
        yield
    except psycopg.Error as exc:
        ours = translate(exc, where, deadline)
        if ours is None:
            raise
        raise ours from exc
