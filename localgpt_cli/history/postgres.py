"""PostgresStore: the `Store` protocol on a PostgreSQL server, for a history a team shares.

Chosen by `history.url = "postgresql://…"` (or LOCALGPT_HISTORY_URL); psycopg 3 comes with the
`postgres` extra and is imported only here, when such a URL is opened. The credentials come from
the URL or libpq's own PG* variables and .pgpass; they are never printed: every message names the
server by `masked(url)`.

It keeps the SQLite store's behaviour (pg_schema.py has the tables): the same ids, seqs, titles,
prefixes, search rule (textsearch.py) and export. Every write is one transaction; appending locks
the conversation's row first (`FOR UPDATE`), so writers on several machines append to one
conversation one after the other, with consecutive seqs and none lost. A server that cannot be
reached is exit 3, refused credentials exit 77, each one line, and a failed transaction leaves
nothing written.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from localgpt_cli.errors import (
    AuthFailed,
    InvalidInput,
    LocalGPTError,
    NotFound,
    OllamaUnreachable,
    UsageError,
)
from localgpt_cli.history import export as _export
from localgpt_cli.history import pg_rows as _rows
from localgpt_cli.history import resolve as _resolve
from localgpt_cli.history import search as _search
from localgpt_cli.history import textsearch
from localgpt_cli.history.pg_schema import migrate, stored_version
from localgpt_cli.history.rows import dump, iso, title_from
from localgpt_cli.history.schema import ROLES
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit
from localgpt_cli.ids import new_id

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

Clock = Callable[[], datetime]
P = ParamSpec("P")
R = TypeVar("R")
CONNECT_TIMEOUT = 10  # seconds: an unreachable server is reported, not waited for


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


def _translate(exc: Exception, where: str) -> LocalGPTError | None:
    """What psycopg raised for a user's situation, as our error; None for a bug."""
    import psycopg

    text = " ".join(str(exc).split())
    state = getattr(exc, "sqlstate", None) or ""
    if state.startswith("28") or "authentication failed" in text or "no password" in text:
        return AuthFailed(f"the history server {where} refused the credentials: {text}",
                          hint="Check the user and password in history.url or PGPASSWORD.")
    if state == "3D000":
        return InvalidInput(f"the history server {where} has no such database: {text}")
    if isinstance(exc, psycopg.OperationalError):
        return OllamaUnreachable(f"the history server {where} is not reachable: {text}",
                                 code="history_unreachable",
                                 hint="Check history.url (or LOCALGPT_HISTORY_URL) and that "
                                 "the server is running.")
    if isinstance(exc, psycopg.DataError):
        return InvalidInput(f"the history server {where} cannot store this: {text}")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return AuthFailed(f"the history server {where} refused: {text}")
    return None


@contextmanager
def pg_errors(where: str) -> Iterator[None]:
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        ours = _translate(exc, where)
        if ours is None:
            raise
        raise ours from exc


def _store_call(
    method: Callable[Concatenate[PostgresStore, P], R],
) -> Callable[Concatenate[PostgresStore, P], R]:
    """One thread at a time on the connection, and psycopg errors translated."""

    @functools.wraps(method)
    def wrapper(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock, pg_errors(self.where):
            return method(self, *args, **kwargs)

    return wrapper


class PostgresStore:
    """Conversations and messages in PostgreSQL; open with `PostgresStore.open(url)`."""

    def __init__(self, conn: Any, where: str, clock: Clock) -> None:
        self._conn = conn
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
            import psycopg
        except ImportError:
            raise InvalidInput(
                f"history.url {where} needs PostgreSQL support, which is not installed.",
                hint="Install it: pip install -e '.[postgres]' (in the localgpt source folder).",
            ) from None
        with pg_errors(where):
            conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                                   application_name="localgpt")  # fmt: skip
            try:
                if not create and stored_version(conn) is None:
                    conn.close()
                    return None
                migrate(conn, where)
            except BaseException:
                conn.close()
                raise
        return cls(conn, where, clock or (lambda: datetime.now(timezone.utc)))

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
        title = (title or "").strip() or None
        metadata = dict(metadata or {})
        now, cid = self._now(), new_id()
        self._conn.execute(
            "INSERT INTO localgpt_conversations (id, title, model, created_at, updated_at,"
            " metadata) VALUES (%s, %s, %s, %s, %s, %s::jsonb)",
            (cid, title, model, now, now, dump(metadata)),
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
        """Append a message (next seq), committed when this returns; the conversation's
        row is locked first, so concurrent appends queue instead of colliding."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        metadata = dict(metadata or {})
        with self._conn.transaction():
            self._require_conversation(conversation_id, lock=True)
            (seq,) = self._conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM localgpt_messages"
                " WHERE conversation_id = %s", (conversation_id,),
            ).fetchone()  # fmt: skip
            message = Message(new_id(), conversation_id, seq, role, content, thinking,
                              tool_calls, tool_name, tool_call_id, metadata, self._now())
            _rows.insert_message(self._conn, message)
            title = title_from(content) if role == "user" else None
            self._conn.execute(
                "UPDATE localgpt_conversations SET updated_at = %s, title = COALESCE(title, %s),"
                " message_count = message_count + 1 WHERE id = %s",
                (message.created_at, title, conversation_id),
            )
        return message

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
    def import_conversation(self, conversation: Conversation, messages: Sequence[Message]) -> int:
        """Store an exported conversation with its ids; returns how many messages were new
        (importing twice adds nothing). See `pg_rows.import_into`."""
        with self._conn.transaction():
            return _rows.import_into(self._conn, conversation, messages)

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
        cursor = self._conn.execute(
            "DELETE FROM localgpt_conversations WHERE updated_at < %s", (cutoff,)
        )
        return int(cursor.rowcount)

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
        row = self._conn.execute(
            f"SELECT {_rows.MESSAGE_COLUMNS} FROM localgpt_messages WHERE id = %s", (message_id,)
        ).fetchone()
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
        found = self._conn.execute(
            "SELECT 1 FROM localgpt_conversations WHERE id = %s" + (" FOR UPDATE" if lock else ""),
            (conversation_id,),
        ).fetchone()
        if found is None:
            raise NotFound(f"no conversation has id {conversation_id!r}.",
                           hint="`localgpt history` lists them.")


if TYPE_CHECKING:
    _store: Store = PostgresStore.open("")
