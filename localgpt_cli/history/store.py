"""HistoryStore: conversations and their messages in one SQLite file.

The file is `$LOCALGPT_HOME/history.db` (the caller passes the path). It is opened in
WAL mode, so `history list` in one terminal never waits for a `chat` writing in
another, with a busy timeout, so two writers queue instead of failing, and with
`synchronous=NORMAL`: a commit is safe against the process dying (Ctrl-C, kill) and
costs no fsync; only a power cut can lose the last commits.

Every write is one `BEGIN IMMEDIATE` transaction: the write lock is taken before the
next `seq` of a conversation is read, so two processes appending to the same
conversation at once both succeed, one after the other, with consecutive seqs.

How a turn is meant to be stored (the kernel's side of the contract):
1. `add_message(cid, "user", text)` before the model is called;
2. when `done` arrives, whatever its reason, `add_message(cid, "assistant", answer,
   thinking=..., tool_calls=..., metadata={"done_reason": reason, "usage": ...})`.
   `done` is always emitted, also after Ctrl-C or an error, so an aborted or failed
   answer is stored with what had streamed so far and marked by `done_reason`.
   A caller that wants a row to exist before streaming (so even SIGKILL leaves a
   trace) may instead add the assistant message at the start with
   metadata={"done_reason": "incomplete"} and complete it with `update_message`.

SQLite errors never leave this class raw: a locked database becomes LockBusy, a
damaged one InvalidInput naming the file (see `_sqlite_errors`).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson

from localgpt_cli.errors import AmbiguousId, InvalidInput, LockBusy, NotFound, UsageError
from localgpt_cli.history import export as _export
from localgpt_cli.history.integrity import left_whole, mark_whole, quick_check
from localgpt_cli.history.preflight import check_existing, damaged
from localgpt_cli.history.schema import ROLES, migrate
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit
from localgpt_cli.ids import new_id, normalize_prefix

BUSY_TIMEOUT_MS = 5000
TITLE_LENGTH = 60
# How many candidates an ambiguous prefix lists.
CANDIDATES_SHOWN = 10
SNIPPET_TOKENS = 16
# How many of the newest matching messages `search` ranks (see there).
SEARCH_WINDOW = 2000

_CONVERSATION_COLUMNS = "id, title, model, message_count, created_at, updated_at"
_MESSAGE_COLUMNS = (
    "id, conversation_id, seq, role, content, thinking, tool_calls, tool_name, "
    "tool_call_id, metadata, created_at"
)
# Ids are Crockford base32 ([0-9A-Z]); "~" sorts after all of them, so every id that
# starts with a prefix p lies in [p, p + "~").
_AFTER_ID_CHARS = "~"

Clock = Callable[[], datetime]
P = ParamSpec("P")
R = TypeVar("R")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a Z: fixed width, so text order is time order."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def title_from(content: str) -> str | None:
    """The title a conversation gets from its first user message.

    The first non-blank line, whitespace collapsed, cut to TITLE_LENGTH characters
    (an ellipsis marks the cut); None when the message has no visible text.
    """
    for line in content.splitlines():
        words = line.split()
        if words:
            title = " ".join(words)
            if len(title) > TITLE_LENGTH:
                title = title[: TITLE_LENGTH - 1].rstrip() + "…"
            return title
    return None


def fts_query(text: str) -> str:
    """User text as an FTS5 query that cannot be a syntax error: every word a quoted string.

    Quoting makes `"`, `-`, `:`, `*`, `(`, AND/OR/NOT/NEAR plain text; the words are
    ANDed (FTS5's implicit operator). Words that hold no letters or digits match nothing.
    """
    words = text.replace("\x00", " ").split()
    if not words:
        raise InvalidInput("nothing to search for: the search text is empty.")
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def _dump(value: Any) -> str:
    # orjson: loading the 10,000 messages of a long conversation spends most of its
    # time decoding metadata, and orjson does that ~15x faster than json.
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _load_object(text: str) -> dict[str, Any]:
    return {} if text == "{}" else dict(orjson.loads(text))


@contextmanager
def _sqlite_errors(path: Path) -> Iterator[None]:
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


def _store_call(
    method: Callable[Concatenate[HistoryStore, P], R],
) -> Callable[Concatenate[HistoryStore, P], R]:
    """One thread at a time on the connection, and SQLite errors translated."""

    @functools.wraps(method)
    def wrapper(self: HistoryStore, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock, _sqlite_errors(self.path):
            return method(self, *args, **kwargs)

    return wrapper


class HistoryStore:
    """Conversations and messages: create, append, find, list, search, export, delete.

    Open with `HistoryStore.open(path)` (also a context manager). One store may be used
    from several threads; calls are serialised.
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path, clock: Clock, *, checked: bool = False
    ) -> None:
        self._conn = conn
        self.path = path
        self._clock = clock
        self._lock = threading.RLock()
        # The file is known whole: checked by this process, or left as it is by the last
        # localgpt that wrote to it (integrity.py); until then no write is made.
        self.checked = checked
        self._wrote = False

    # -- opening and closing ------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock | None = None) -> HistoryStore:
        """Open (creating it and its folders if needed) the history database at `path`.

        Refused with InvalidInput, the file left byte for byte as it was, when it is
        not a SQLite database, is damaged, belongs to another program, or has a schema
        newer than this version knows. A new file is created with mode 0600 (and so
        are its -wal/-shm files): conversations are private. `clock` returns the
        current time (aware datetime); tests pass one to make old conversations.
        """
        path = Path(path).expanduser()
        check_existing(path)
        checked = left_whole(path)
        previous_umask = os.umask(0o077)
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InvalidInput(
                    f"cannot create the folder {path.parent} for the history database: "
                    f"{exc.strerror}."
                ) from exc
            with _sqlite_errors(path):
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
        return cls(conn, path, clock or _utc_now, checked=checked)

    def close(self) -> None:
        """Close the file; after writes to it, record it as whole (see integrity.py)."""
        with self._lock:
            self._conn.close()
            if self._wrote:
                mark_whole(self.path)

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------

    @_store_call
    def create_conversation(
        self, model: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        """A new, empty conversation. Without a title, its first user message names it."""
        title = (title or "").strip() or None
        metadata = dict(metadata or {})
        with self._write():
            now, cid = self._now(), new_id()
            self._conn.execute(
                "INSERT INTO conversations (id, title, model, created_at, updated_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (cid, title, model, now, now, _dump(metadata)),
            )
        return Conversation(cid, title, model, 0, now, now, metadata)

    @_store_call
    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        *,
        thinking: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Append a message (next seq of the conversation), committed when this returns.

        Also bumps the conversation's updated_at and, for the first user message of an
        untitled conversation, sets its title (`title_from`). NotFound for an unknown
        conversation id (a full id: resolve prefixes with `resolve` first).
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        metadata = dict(metadata or {})
        calls = None if tool_calls is None else _dump(tool_calls)
        title = title_from(content) if role == "user" else None
        with self._write():
            self._require_conversation(conversation_id)
            (seq,) = self._conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            now, mid = self._now(), new_id()
            self._conn.execute(
                f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    mid,
                    conversation_id,
                    seq,
                    role,
                    content,
                    thinking,
                    calls,
                    tool_name,
                    tool_call_id,
                    _dump(metadata),
                    now,
                ),
            )
            self._conn.execute(
                "UPDATE conversations SET updated_at = ?, title = COALESCE(title, ?) WHERE id = ?",
                (now, title, conversation_id),
            )
        return Message(
            mid,
            conversation_id,
            seq,
            role,
            content,
            thinking,
            tool_calls,
            tool_name,
            tool_call_id,
            metadata,
            now,
        )

    @_store_call
    def update_message(
        self,
        message_id: str,
        *,
        content: str | None = None,
        thinking: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Complete or amend a stored message; returns it as now stored.

        content, thinking and tool_calls replace what was stored when given. metadata
        is merged into the stored metadata key by key; a key given as None is removed.
        """
        with self._write():
            row = self._conn.execute(
                "SELECT conversation_id, metadata FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no message has id {message_id!r}.")
            conversation_id, stored = row
            changes: dict[str, Any] = {}
            if content is not None:
                changes["content"] = content
            if thinking is not None:
                changes["thinking"] = thinking
            if tool_calls is not None:
                changes["tool_calls"] = _dump(tool_calls)
            if metadata is not None:
                merged = {**_load_object(stored), **metadata}
                changes["metadata"] = _dump({k: v for k, v in merged.items() if v is not None})
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)
                self._conn.execute(
                    f"UPDATE messages SET {assignments} WHERE id = ?",
                    (*changes.values(), message_id),
                )
                self._conn.execute(
                    "UPDATE conversations SET updated_at = ? WHERE id = ?",
                    (self._now(), conversation_id),
                )
        return self.get_message(message_id)

    @_store_call
    def delete(self, conversation_ids: Iterable[str]) -> int:
        """Delete conversations (full ids) with their messages and index entries.

        All or nothing: if any id is unknown, NotFound names it and nothing is deleted.
        Returns how many were deleted.
        """
        ids = list(dict.fromkeys(conversation_ids))
        with self._write():
            missing = [
                cid
                for cid in ids
                if self._conn.execute("SELECT 1 FROM conversations WHERE id = ?", (cid,)).fetchone()
                is None
            ]
            if missing:
                raise NotFound(f"no conversation has id {', '.join(missing)}; nothing deleted.")
            self._conn.executemany(
                "DELETE FROM conversations WHERE id = ?", [(cid,) for cid in ids]
            )
        return len(ids)

    @_store_call
    def prune(self, older_than: timedelta) -> int:
        """Delete the conversations not updated within `older_than`; returns how many."""
        if older_than < timedelta(0):
            raise InvalidInput(f"prune needs a positive age, not {older_than}.")
        cutoff = iso(self._clock() - older_than)
        with self._write():
            cursor = self._conn.execute("DELETE FROM conversations WHERE updated_at < ?", (cutoff,))
        return cursor.rowcount

    # -- reading ------------------------------------------------------------------

    @_store_call
    def get(self, conversation_id: str) -> Conversation:
        """The conversation with exactly this id (NotFound otherwise)."""
        row = self._conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS}, metadata FROM conversations WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise NotFound(
                f"no conversation has id {conversation_id!r}.",
                hint="`localgpt history` lists them.",
            )
        cid, title, model, count, created_at, updated_at, metadata = row
        return Conversation(
            cid, title, model, count, created_at, updated_at, _load_object(metadata)
        )

    @_store_call
    def get_message(self, message_id: str) -> Message:
        """The message with exactly this id (NotFound otherwise)."""
        row = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no message has id {message_id!r}.")
        return _message(row)

    @_store_call
    def latest(self) -> Conversation | None:
        """The most recently updated conversation (what `chat -c` continues), if any."""
        row = self._conn.execute(
            "SELECT id FROM conversations ORDER BY updated_at DESC, id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else self.get(row[0])

    @_store_call
    def resolve(self, reference: str) -> Conversation:
        """The conversation named by a full id, a unique prefix of one, or `latest`.

        Case does not matter. NotFound when nothing matches; AmbiguousId (listing the
        candidates, newest first) when a prefix matches more than one.
        """
        text = reference.strip()
        if text.lower() == "latest":
            conversation = self.latest()
            if conversation is None:
                raise NotFound(
                    "there are no conversations yet.", hint="`localgpt chat` starts one."
                )
            return conversation
        if not text:
            raise InvalidInput(
                "the conversation id is empty.", hint="Give an id, a prefix of one, or `latest`."
            )
        prefix = normalize_prefix(text)
        rows = (
            []
            if prefix is None
            else self._conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations"
                " WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT ?",
                (prefix, prefix + _AFTER_ID_CHARS, CANDIDATES_SHOWN + 1),
            ).fetchall()
        )
        if not rows:
            raise NotFound(
                f"no conversation has an id starting with {text!r}.",
                hint="`localgpt history` lists them.",
            )
        if len(rows) > 1:
            shown = [ConversationSummary(*row) for row in rows[:CANDIDATES_SHOWN]]
            listed = "; ".join(f"{c.id} ({c.title or 'untitled'})" for c in shown)
            more = ", and more" if len(rows) > CANDIDATES_SHOWN else ""
            raise AmbiguousId(
                f"conversation id {text!r} is ambiguous: it starts {listed}{more}.",
                candidates=[c.id for c in shown],
                hint="Give more characters of the id.",
            )
        return self.get(rows[0][0])

    @_store_call
    def list_conversations(self, limit: int = 20, offset: int = 0) -> list[ConversationSummary]:
        """Conversations, most recently updated first."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        rows = self._conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations"
            " ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (limit, offset),
        ).fetchall()
        return [ConversationSummary(*row) for row in rows]

    @_store_call
    def messages(self, conversation_id: str, *, last: int | None = None) -> list[Message]:
        """The messages of a conversation in seq order; with `last`, only the last N.

        The last N are read backwards along the (conversation_id, seq) index, so the
        cost depends on N, not on the length of the conversation.
        """
        self._require_conversation(conversation_id)
        if last is None:
            rows = self._conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
        else:
            if last < 0:
                raise ValueError("last must not be negative")
            rows = self._conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?"
                " ORDER BY seq DESC LIMIT ?",
                (conversation_id, last),
            ).fetchall()
            rows.reverse()
        return [_message(row) for row in rows]

    @_store_call
    def search(
        self, text: str, limit: int = 20, *, highlight: tuple[str, str] = ("**", "**")
    ) -> list[SearchHit]:
        """Messages containing all the words of `text`, best match first (BM25).

        Any text is safe (see `fts_query`); empty text is InvalidInput. Matching ignores
        case and accents. The snippet marks matched words with `highlight`.

        Ranking considers the SEARCH_WINDOW most recent matching messages only: scoring
        every match of a word found in 100,000 messages takes a quarter of a second,
        while finding the 2,000 newest is cheap (the index is walked newest first and
        stops). Older matches of so common a word are out of view; more words narrow
        the search and bring them back.
        """
        if limit < 0:
            raise ValueError("limit must not be negative")
        query = fts_query(text)
        # The smallest rowid among the newest SEARCH_WINDOW matches; None if fewer match.
        floor = self._conn.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (query, SEARCH_WINDOW - 1),
        ).fetchone()
        rows = self._conn.execute(
            "SELECT m.conversation_id, c.title, m.id, m.seq, m.role, m.created_at,"
            " snippet(messages_fts, 0, ?, ?, '…', ?)"
            " FROM messages_fts"
            " JOIN messages AS m ON m.pk = messages_fts.rowid"
            " JOIN conversations AS c ON c.id = m.conversation_id"
            " WHERE messages_fts MATCH ? AND messages_fts.rowid >= ?"
            " ORDER BY rank LIMIT ?",
            (*highlight, SNIPPET_TOKENS, query, floor[0] if floor else 0, limit),
        ).fetchall()
        return [
            SearchHit(rank, cid, title, mid, seq, role, snippet, created_at)
            for rank, (cid, title, mid, seq, role, created_at, snippet) in enumerate(rows, 1)
        ]

    @_store_call
    def export(self, conversation_id: str, format: str = "json") -> str:
        """The whole conversation as a JSON document or as Markdown (see export.py)."""
        writers = {"json": _export.to_json, "markdown": _export.to_markdown}
        if format not in writers:
            raise UsageError(f"export format must be json or markdown, not {format!r}.")
        return writers[format](self.get(conversation_id), self.messages(conversation_id))

    # -- helpers ------------------------------------------------------------------

    def _now(self) -> str:
        return iso(self._clock())

    def _require_conversation(self, conversation_id: str) -> None:
        found = self._conn.execute(
            "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if found is None:
            raise NotFound(
                f"no conversation has id {conversation_id!r}.",
                hint="`localgpt history` lists them.",
            )

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction, holding the write lock from its first statement.

        Never to a file not known whole: the first write checks it (integrity.py).
        """
        if not self.checked:
            quick_check(self._conn, self.path)
            self.checked = True
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # SQLite has already rolled back after some errors (a full disk, say).
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        self._wrote = True


def _configure(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    migrate(conn, path)


def _message(row: tuple[Any, ...]) -> Message:
    (
        mid,
        cid,
        seq,
        role,
        content,
        thinking,
        calls,
        tool_name,
        tool_call_id,
        metadata,
        created_at,
    ) = row
    return Message(
        mid,
        cid,
        seq,
        role,
        content,
        thinking,
        None if calls is None else orjson.loads(calls),
        tool_name,
        tool_call_id,
        _load_object(metadata),
        created_at,
    )
