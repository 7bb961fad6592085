"""PostgresStore: the `Store` protocol on a PostgreSQL server, for a history a team shares.

Chosen by `history.url = "postgresql://…"` (or LOCALGPT_HISTORY_URL); psycopg 3 comes with the
`postgres` extra and is imported only here, when such a URL is opened. The credentials come from
the URL or libpq's own PG* variables and .pgpass; they are never printed: every message names the
server by `masked(url)`.

It keeps the SQLite store's behaviour (pg_schema.py has the tables): the same ids, seqs, titles,
prefixes, search rule (textsearch.py) and export. Every write is one transaction; appending locks
the conversation's row first (`FOR UPDATE`), so writers on several machines append to one
conversation one after the other, with consecutive seqs and none lost. Every wait on the server
is bounded and its failures are one line each (pg_connect.py: unreachable or hung exit 3, busy
75, refused 77, no such database 6); a failed transaction leaves nothing written, and a call
cut by a lost connection (a restart) is run again once on a new one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from localgpt_cli.errors import InvalidInput, LocalGPTError, NotFound, UsageError
from localgpt_cli.history import export as _export
from localgpt_cli.history import pg_rows as _rows
from localgpt_cli.history import resolve as _resolve
from localgpt_cli.history import search as _search
from localgpt_cli.history import textsearch
from localgpt_cli.history.pg_schema import migrate, stored_version
from localgpt_cli.history.rows import dump, iso, title_from
from localgpt_cli.history.schema import KEEP_IMAGE, ROLES
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit
from localgpt_cli.ids import new_id

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

Clock = Callable[[], datetime]
P = ParamSpec("P")
R = TypeVar("R")


def masked(url: str) -> str:
    """`url` with its password (in the user part or a `password=` parameter) as `***`."""
    parts = urlsplit(url)
    if parts.password is None and "password" not in parts.query.lower():
        return url
    if parts.password is not None:
        user, host = parts.netloc.rsplit("@", 1)
        parts = parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}")
    if parts.query:
        query = [(k, "***" if k.lower() == "password" else v)
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        parts = parts._replace(query=urlencode(query, safe="*"))
    return urlunsplit(parts)


def _store_call(
    method: Callable[Concatenate[PostgresStore, P], R],
) -> Callable[Concatenate[PostgresStore, P], R]:
    """One thread at a time on the connection, psycopg's errors translated, and a call
    cut by a lost connection (a restart) run again once on a new one: the writes are
    single transactions, and an append that did commit is found by its id (`_append`)."""

    @functools.wraps(method)
    def wrapper(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        from localgpt_cli.history.pg_connect import lost, pg_errors

        with self._lock:
            try:
                with pg_errors(self.where, self._conn.deadline):
                    return method(self, *args, **kwargs)
            except LocalGPTError as exc:
                if not lost(exc) or self._url is None:
                    raise
            self._reconnect()
            with pg_errors(self.where, self._conn.deadline):
                return method(self, *args, **kwargs)

    return wrapper


class PostgresStore:
    """Conversations and messages in PostgreSQL; open with `PostgresStore.open(url)`."""

    def __init__(self, conn: Any, where: str, clock: Clock, url: str | None = None) -> None:
        self._conn = conn
        self._url = url  # to reconnect once after a lost connection
        self.where = where
        self._clock = clock
        self._lock = threading.RLock()

    @classmethod
    def open(cls, url: str, *, clock: Clock | None = None) -> PostgresStore:
        """Connect (bringing the schema up to date); errors as in the module docstring."""
        return cast(PostgresStore, cls.open_existing(url, clock=clock, create=True))

    @classmethod
    def open_existing(cls, url: str, *, clock: Clock | None = None,
                      create: bool = False) -> PostgresStore | None:  # fmt: skip
        """`open`, but a database localgpt never wrote to is None (read-only commands), as
        a missing SQLite file is: reading must not need the right to create tables."""
        where = masked(url)
        try:
            import psycopg  # noqa: F401 (pg_connect needs it)
        except ImportError:
            raise InvalidInput(
                f"history.url {where} needs PostgreSQL support, which is not installed.",
                hint="Install it: pip install -e '.[postgres]' (in the localgpt source folder).",
            ) from None
        from localgpt_cli.history.pg_connect import connect, pg_errors

        with pg_errors(where):
            conn = connect(url)
            try:
                if not create and stored_version(conn) is None:
                    conn.close()
                    return None
                migrate(conn, where)
            except BaseException:
                conn.close()
                raise
        return cls(conn, where, clock or (lambda: datetime.now(timezone.utc)), url)

    def _reconnect(self) -> None:
        """A new connection after the old one was cut (a restarting server is waited for,
        within pg_connect.CONNECT_TIMEOUT)."""
        from localgpt_cli.history.pg_connect import connect, pg_errors

        assert self._url is not None
        self._conn.close()
        with pg_errors(self.where):
            self._conn = connect(self._url, patient=True)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------

    @_store_call
    def create_conversation(
        self, model: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        """A new, empty conversation. Without a title, its first user message names it."""
        title, metadata = (title or "").strip() or None, dict(metadata or {})
        now, cid = self._now(), new_id()
        self._conn.execute(
            "INSERT INTO localgpt_conversations (id, title, model, created_at, updated_at,"
            " metadata) VALUES (%s, %s, %s, %s, %s, %s::jsonb)",
            (cid, title, model, now, now, dump(metadata)))  # fmt: skip
        return Conversation(cid, title, model, 0, now, now, metadata)

    def start_conversation(
        self, model: str, content: str, *, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A new conversation with its first user message, in one transaction: a process
        killed in between leaves neither (no empty, untitled conversation)."""
        draft = Message(new_id(), new_id(), 0, "user", content, None, None, None, None,
                        dict(metadata or {}), "")  # fmt: skip
        return self._store(draft, model)

    def add_message(self, conversation_id: str, role: str, content: str, *,
                    thinking: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
                    tool_name: str | None = None, tool_call_id: str | None = None,
                    metadata: dict[str, Any] | None = None,
                    reply_to: str | None = None) -> Message:  # fmt: skip
        """Append a message (next seq), committed when this returns; the conversation's
        row is locked first, so concurrent appends queue instead of colliding."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        draft = Message(new_id(), conversation_id, 0, role, content, thinking, tool_calls,
                        tool_name, tool_call_id, dict(metadata or {}), "", reply_to)  # fmt: skip
        return self._store(draft)

    @_store_call
    def _store(self, draft: Message, model: str | None = None) -> Message:
        """Append `draft` (its id chosen by the caller, so a second try after a lost
        connection finds it if the first committed); with `model`, create its
        conversation in the same transaction."""
        with self._conn.transaction():
            if model is not None:
                self._conn.execute(
                    "INSERT INTO localgpt_conversations (id, model, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (draft.conversation_id, model, self._now(), self._now()))  # fmt: skip
            row = self._conn.execute(f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages"
                                     " WHERE id = %s", (draft.id,)).fetchone()  # fmt: skip
            if row is not None:
                return _rows.message_from_row(row)
            self._require_conversation(draft.conversation_id, lock=True)
            (seq,) = self._conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM localgpt_messages"
                " WHERE conversation_id = %s", (draft.conversation_id,),
            ).fetchone()  # fmt: skip
            message = replace(draft, seq=seq, created_at=self._now())
            _rows.insert_message(self._conn, message)
            title = title_from(message.content) if message.role == "user" else None
            self._conn.execute(
                "UPDATE localgpt_conversations SET updated_at = %s, title = COALESCE(title, %s),"
                " message_count = message_count + 1 WHERE id = %s",
                (message.created_at, title, message.conversation_id),
            )
        return message

    @_store_call
    def keep_image(self, message_id: str, sha256: str, media_type: str, data: bytes) -> None:
        """history.keep_images: a picture's bytes, beside the message that sent it."""
        self._conn.execute(KEEP_IMAGE.format(table="localgpt_message_images", p="%s"),
                           (message_id, sha256, media_type, data))  # fmt: skip

    @_store_call
    def update_metadata(self, message_id: str, changes: dict[str, Any]) -> Message:
        """Merge `changes` into a message's metadata (a None value removes the key)."""
        with self._conn.transaction():
            row = self._conn.execute(
                f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages WHERE id = %s"
                " FOR UPDATE", (message_id,),
            ).fetchone()  # fmt: skip
            if row is None:
                raise NotFound(f"no message has id {message_id!r}.")
            message = _rows.message_from_row(row)
            metadata = _resolve.merged_metadata(message.metadata, changes)
            self._conn.execute("UPDATE localgpt_messages SET metadata = %s::jsonb WHERE id = %s",
                               (dump(metadata), message_id))  # fmt: skip
        return replace(message, metadata=metadata)

    @_store_call
    def import_conversation(self, conversation: Conversation, messages: Sequence[Message],
                            *, replace: bool = False) -> int:  # fmt: skip
        """Store an exported conversation with its ids; returns how many messages were
        written (importing twice writes nothing). See `pg_rows.import_into`."""
        with self._conn.transaction():
            return _rows.import_into(self._conn, conversation, messages, replace)

    @_store_call
    def delete(self, conversation_ids: Iterable[str]) -> int:
        """Delete conversations (full ids) with their messages, all or nothing."""
        ids = list(dict.fromkeys(conversation_ids))
        with self._conn.transaction():
            found = {r[0] for r in self._conn.execute(
                "SELECT id FROM localgpt_conversations WHERE id = ANY(%s) FOR UPDATE", (ids,))}
            missing = [cid for cid in ids if cid not in found]
            if missing:
                raise NotFound(f"no conversation has id {', '.join(missing)}; nothing deleted.")
            self._conn.execute("DELETE FROM localgpt_conversations WHERE id = ANY(%s)", (ids,))
        return len(ids)

    @_store_call
    def prune(self, older_than: timedelta) -> int:
        """Delete the conversations not updated within `older_than`; returns how many."""
        if older_than < timedelta(0):
            raise InvalidInput(f"prune needs a positive age, not {older_than}.")
        cutoff = iso(self._clock() - older_than)
        return int(self._conn.execute(
            "DELETE FROM localgpt_conversations WHERE updated_at < %s", (cutoff,)).rowcount)

    # -- reading ------------------------------------------------------------------

    @_store_call
    def get(self, conversation_id: str) -> Conversation:
        """The conversation with exactly this id (NotFound otherwise)."""
        row = self._conn.execute(
            f"SELECT {_rows.CONVERSATION_COLUMNS}, metadata FROM localgpt_conversations"
            " WHERE id = %s", (conversation_id,),
        ).fetchone()  # fmt: skip
        if row is None:
            raise NotFound(f"no conversation has id {conversation_id!r}.",
                           hint="`localgpt history` lists them.")
        cid, title, model, count, created_at, updated_at, metadata = row
        return Conversation(cid, title, model, count, created_at, updated_at, dict(metadata))

    @_store_call
    def get_message(self, message_id: str) -> Message:
        """The message with exactly this id (NotFound otherwise)."""
        row = self._conn.execute(f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages"
                                 " WHERE id = %s", (message_id,)).fetchone()  # fmt: skip
        if row is None:
            raise NotFound(f"no message has id {message_id!r}.")
        return _rows.message_from_row(row)

    @_store_call
    def latest(self) -> Conversation | None:
        """The most recently updated conversation (what `chat -c` continues), if any."""
        newest = self.list_conversations(limit=1)
        return self.get(newest[0].id) if newest else None

    @_store_call
    def resolve(self, reference: str) -> Conversation:
        """The conversation named by a full id, a unique prefix of one, or `latest`."""
        return _resolve.resolve(
            reference, latest=self.latest, starting_with=self._starting_with, get=self.get
        )

    def _starting_with(self, prefix: str, limit: int) -> list[ConversationSummary]:
        rows = self._conn.execute(
            f"SELECT {_rows.CONVERSATION_COLUMNS} FROM localgpt_conversations"
            " WHERE id LIKE %s ORDER BY id DESC LIMIT %s", (prefix + "%", limit),
        ).fetchall()  # fmt: skip
        return [ConversationSummary(*row) for row in rows]

    @_store_call
    def resolve_message(self, reference: str) -> Message:
        """The message named by a full id or a unique prefix of one (resolve.py)."""
        return _resolve.resolve_message(reference, lambda prefix, limit: [
            _rows.message_from_row(row) for row in self._conn.execute(
                f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages WHERE id LIKE %s"
                " ORDER BY id DESC LIMIT %s", (prefix + "%", limit))])

    @_store_call
    def list_conversations(self, limit: int = 20, offset: int = 0) -> list[ConversationSummary]:
        """Conversations, most recently updated first."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        rows = self._conn.execute(
            f"SELECT {_rows.CONVERSATION_COLUMNS} FROM localgpt_conversations"
            " ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s", (limit, offset),
        ).fetchall()  # fmt: skip
        return [ConversationSummary(*row) for row in rows]

    @_store_call
    def messages(self, conversation_id: str, *, last: int | None = None) -> list[Message]:
        """The messages of a conversation in seq order; with `last`, only the last N."""
        self._require_conversation(conversation_id)
        if last is not None and last < 0:
            raise ValueError("last must not be negative")
        rows = self._conn.execute(
            f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages WHERE conversation_id = %s"
            " ORDER BY seq DESC LIMIT %s", (conversation_id, last),
        ).fetchall()  # fmt: skip
        rows.reverse()
        return [_rows.message_from_row(row) for row in rows]

    @_store_call
    def search(
        self, text: str, limit: int = 20, *, highlight: tuple[str, str] = ("**", "**")
    ) -> list[SearchHit]:
        """Messages holding all the words of `text`, best first (ts_rank), among the
        newest SEARCH_WINDOW matches, as in SQLite (search.py says why)."""
        if limit < 0:
            raise ValueError("limit must not be negative")
        phrases = textsearch.query_phrases(text)
        query = _rows.tsquery(phrases)
        if query is None:
            return []
        rows = self._conn.execute(
            "WITH hits AS (SELECT pk, id, conversation_id, seq, role, created_at, content,"
            " ts_rank(search, q, 1) AS score FROM localgpt_messages,"
            " to_tsquery('simple', %s) AS q WHERE search @@ q ORDER BY pk DESC LIMIT %s)"
            " SELECT h.conversation_id, c.title, h.id, h.seq, h.role, h.created_at, h.content"
            " FROM hits AS h JOIN localgpt_conversations AS c ON c.id = h.conversation_id"
            " ORDER BY h.score DESC, h.pk DESC LIMIT %s",
            (query, _search.SEARCH_WINDOW, limit),
            # Never a prepared, generic plan: it cannot know how rare the words are and
            # walks the whole table backwards for a rare one (100 ms at 100,000 messages
            # instead of 0.5 ms through the GIN index).
            prepare=False,
        ).fetchall()
        return [
            SearchHit(rank, cid, title, mid, seq, role,
                      textsearch.snippet(content, phrases, highlight), created_at)
            for rank, (cid, title, mid, seq, role, created_at, content) in enumerate(rows, 1)
        ]  # fmt: skip

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

    def _require_conversation(self, conversation_id: str, *, lock: bool = False) -> None:
        found = self._conn.execute("SELECT 1 FROM localgpt_conversations WHERE id = %s"
                                   + (" FOR UPDATE" if lock else ""), (conversation_id,)).fetchone()
        if found is None:
            raise NotFound(f"no conversation has id {conversation_id!r}.",
                           hint="`localgpt history` lists them.")


if TYPE_CHECKING:
    _store: Store = PostgresStore.open("")
