"""SQLiteStore: conversations and their messages in one SQLite file.

The file is `$LOCALGPT_HOME/history.db` (the caller passes the path); how it is opened
(WAL, busy timeout, synchronous=NORMAL) is in connection.py, the row layout in rows.py
and full-text search in search.py. This class implements the `Store` protocol
(protocol.py), which also says how a turn is meant to be stored.

Every write is one `BEGIN IMMEDIATE` transaction: the write lock is taken before the
next `seq` of a conversation is read, so two processes appending to the same
conversation at once both succeed, one after the other, with consecutive seqs.

SQLite errors never leave this class raw: a locked database becomes LockBusy, a
damaged one InvalidInput naming the file (see `connection.sqlite_errors`).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from localgpt_cli.errors import InvalidInput, NotFound, UsageError
from localgpt_cli.history import export as _export
from localgpt_cli.history import resolve as _resolve
from localgpt_cli.history import search as _search
from localgpt_cli.history.connection import connect, sqlite_errors
from localgpt_cli.history.integrity import left_whole, mark_whole, quick_check
from localgpt_cli.history.preflight import check_existing
from localgpt_cli.history.rows import (
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    dump,
    insert_message,
    iso,
    load_object,
    message_from_row,
    title_from,
)
from localgpt_cli.history.schema import KEEP_IMAGE, ROLES
from localgpt_cli.history.sqlite_import import import_into
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit
from localgpt_cli.ids import new_id

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

# Ids are Crockford base32 ([0-9A-Z]); "~" sorts after all of them, so every id that
# starts with a prefix p lies in [p, p + "~").
_AFTER_ID_CHARS = "~"

Clock = Callable[[], datetime]
P = ParamSpec("P")
R = TypeVar("R")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _store_call(
    method: Callable[Concatenate[SQLiteStore, P], R],
) -> Callable[Concatenate[SQLiteStore, P], R]:
    """One thread at a time on the connection, and SQLite errors translated."""

    @functools.wraps(method)
    def wrapper(self: SQLiteStore, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock, sqlite_errors(self.path):
            return method(self, *args, **kwargs)

    return wrapper


class SQLiteStore:
    """Conversations and messages: create, append, find, list, search, export, delete.

    Open with `SQLiteStore.open(path)` (also a context manager). One store may be used
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
    def open(cls, path: str | PathLike[str], *, clock: Clock | None = None) -> SQLiteStore:
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
        return cls(connect(path), path, clock or _utc_now, checked=checked)

    def close(self) -> None:
        """Close the file; after writes to it, record it as whole (see integrity.py)."""
        with self._lock:
            self._conn.close()
            if self._wrote:
                mark_whole(self.path)

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
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
                (cid, title, model, now, now, dump(metadata)),
            )
        return Conversation(cid, title, model, 0, now, now, metadata)

    @_store_call
    def start_conversation(
        self, model: str, content: str, *, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A new conversation with its first user message, in one transaction: a process
        killed in between leaves neither (no empty, untitled conversation)."""
        with self._write():
            now, cid = self._now(), new_id()
            self._conn.execute(
                "INSERT INTO conversations (id, title, model, created_at, updated_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?)", (cid, None, model, now, now, "{}"))
            return self._append(cid, "user", content, metadata=metadata)

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
        reply_to: str | None = None,
    ) -> Message:
        """Append a message (next seq of the conversation), committed when this returns.

        Also bumps the conversation's updated_at and, for the first user message of an
        untitled conversation, sets its title (`title_from`). NotFound for an unknown
        conversation id (a full id: resolve prefixes with `resolve` first).
        """
        with self._write():
            return self._append(conversation_id, role, content, thinking=thinking,
                                tool_calls=tool_calls, tool_name=tool_name,
                                tool_call_id=tool_call_id, metadata=metadata,
                                reply_to=reply_to)  # fmt: skip

    def _append(self, conversation_id: str, role: str, content: str, *,
                thinking: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
                tool_name: str | None = None, tool_call_id: str | None = None,
                metadata: dict[str, Any] | None = None,
                reply_to: str | None = None) -> Message:  # fmt: skip
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        self._require_conversation(conversation_id)
        (seq,) = self._conn.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()
        message = Message(new_id(), conversation_id, seq, role, content, thinking, tool_calls,
                          tool_name, tool_call_id, dict(metadata or {}), self._now(),
                          reply_to)  # fmt: skip
        insert_message(self._conn, message)
        self._conn.execute(
            "UPDATE conversations SET updated_at = ?, title = COALESCE(title, ?) WHERE id = ?",
            (message.created_at, title_from(content) if role == "user" else None,
             conversation_id),
        )  # fmt: skip
        return message

    @_store_call
    def update_metadata(self, message_id: str, changes: dict[str, Any]) -> Message:
        """Merge `changes` into a stored message's metadata (a None value removes the key).

        How a message is marked after the fact (`important`, say) without rewriting it:
        the content, seq and full-text entry stay as they are. NotFound for an unknown id.
        """
        with self._write():
            message = self.get_message(message_id)
            metadata = _resolve.merged_metadata(message.metadata, changes)
            self._conn.execute("UPDATE messages SET metadata = ? WHERE id = ?",
                               (dump(metadata), message_id))  # fmt: skip
        return replace(message, metadata=metadata)

    @_store_call
    def import_conversation(self, conversation: Conversation, messages: Sequence[Message],
                            *, replace: bool = False) -> int:  # fmt: skip
        """Store an exported conversation under its ids; returns how many messages were
        written (importing twice writes nothing). See sqlite_import.py."""
        with self._write():
            return import_into(self._conn, conversation, messages, replace)

    @_store_call
    def keep_image(self, message_id: str, sha256: str, media_type: str, data: bytes) -> None:
        """history.keep_images: a picture's bytes, beside the message that sent it."""
        with self._write():
            self._conn.execute(KEEP_IMAGE.format(table="message_images", p="?"),
                               (message_id, sha256, media_type, data))  # fmt: skip

    @_store_call
    def delete(self, conversation_ids: Iterable[str]) -> int:
        """Delete conversations (full ids) with their messages and index entries, all or
        nothing: NotFound names an unknown id and nothing is deleted. Returns how many."""
        ids = list(dict.fromkeys(conversation_ids))
        with self._write():
            missing = [cid for cid in ids if self._conn.execute(
                "SELECT 1 FROM conversations WHERE id = ?", (cid,)).fetchone() is None]
            if missing:
                raise NotFound(f"no conversation has id {', '.join(missing)}; nothing deleted.")
            self._conn.executemany("DELETE FROM conversations WHERE id = ?", [(c,) for c in ids])
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
            f"SELECT {CONVERSATION_COLUMNS}, metadata FROM conversations WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no conversation has id {conversation_id!r}.",
                           hint="`localgpt history` lists them.")  # fmt: skip
        cid, title, model, count, created_at, updated_at, metadata = row
        return Conversation(cid, title, model, count, created_at, updated_at, load_object(metadata))

    @_store_call
    def get_message(self, message_id: str) -> Message:
        """The message with exactly this id (NotFound otherwise)."""
        row = self._conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?",
                                 (message_id,)).fetchone()  # fmt: skip
        if row is None:
            raise NotFound(f"no message has id {message_id!r}.")
        return message_from_row(row)

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
        candidates, newest first) when a prefix matches more than one (resolve.py).
        """
        return _resolve.resolve(
            reference, latest=self.latest, starting_with=self._starting_with, get=self.get
        )

    def _starting_with(self, prefix: str, limit: int) -> list[ConversationSummary]:
        rows = self._conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations"
            " WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT ?",
            (prefix, prefix + _AFTER_ID_CHARS, limit)).fetchall()  # fmt: skip
        return [ConversationSummary(*row) for row in rows]

    @_store_call
    def resolve_message(self, reference: str) -> Message:
        """The message named by a full id or a unique prefix of one (resolve.py)."""
        return _resolve.resolve_message(reference, lambda prefix, limit: [
            message_from_row(row) for row in self._conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id >= ? AND id < ?"
                " ORDER BY id DESC LIMIT ?", (prefix, prefix + _AFTER_ID_CHARS, limit))])

    @_store_call
    def list_conversations(self, limit: int = 20, offset: int = 0) -> list[ConversationSummary]:
        """Conversations, most recently updated first."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        rows = self._conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations"
            " ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?", (limit, offset),
        ).fetchall()  # fmt: skip
        return [ConversationSummary(*row) for row in rows]

    @_store_call
    def messages(self, conversation_id: str, *, last: int | None = None) -> list[Message]:
        """The messages of a conversation in seq order; with `last`, only the last N (read
        backwards along the (conversation_id, seq) index: the cost depends on N alone)."""
        self._require_conversation(conversation_id)
        if last is not None and last < 0:
            raise ValueError("last must not be negative")
        rows = self._conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?"
            " ORDER BY seq DESC LIMIT ?", (conversation_id, -1 if last is None else last),
        ).fetchall()  # fmt: skip
        rows.reverse()
        return [message_from_row(row) for row in rows]

    @_store_call
    def search(
        self, text: str, limit: int = 20, *, highlight: tuple[str, str] = ("**", "**")
    ) -> list[SearchHit]:
        """Messages containing all the words of `text`, best match first (BM25).

        Any text is safe; empty text is InvalidInput. The snippet marks matched words
        with `highlight`. Only the newest matches are ranked (search.py says why).
        """
        return _search.search(self._conn, text, limit, highlight)

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
            raise NotFound(f"no conversation has id {conversation_id!r}.",
                           hint="`localgpt history` lists them.")  # fmt: skip

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


if TYPE_CHECKING:
    # The type checker holds the SQLite store to the protocol its callers are written against.
    _store: Store = SQLiteStore.open("")
