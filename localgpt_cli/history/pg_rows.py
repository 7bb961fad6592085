"""How messages are laid out in PostgreSQL rows, written, searched and imported.

The SQLite store's rows.py has the column order; here the JSON columns are jsonb
(psycopg hands them back decoded) and each message also carries `search`, the
tsvector of its folded words (textsearch.py), built from the same words `history
search` folds its query into.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localgpt_cli.history import textsearch
from localgpt_cli.history.rows import dump
from localgpt_cli.history.transfer import missing_messages
from localgpt_cli.history.types import Conversation, Message

CONVERSATION_COLUMNS = "id, title, model, message_count, created_at, updated_at"
MESSAGE_COLUMNS = (
    "id, conversation_id, seq, role, content, thinking, tool_calls, tool_name, "
    "tool_call_id, metadata, created_at"
)
# A tsvector holds at most 1 MB: a message is indexed by its first INDEX_WORDS words.
INDEX_WORDS = 50_000


def message_from_row(row: Sequence[Any]) -> Message:
    """A row selected with MESSAGE_COLUMNS as a Message."""
    mid, cid, seq, role, content, thinking, calls, tool_name, tool_call_id, meta, at = row
    return Message(mid, cid, seq, role, content, thinking, calls, tool_name, tool_call_id,
                   dict(meta), at)  # fmt: skip


def insert_message(conn: Any, m: Message) -> None:
    """Insert one message row with its search vector (inside the caller's transaction)."""
    indexed = " ".join(textsearch.words(m.content)[:INDEX_WORDS])
    calls = None if m.tool_calls is None else dump(m.tool_calls)
    conn.execute(
        f"INSERT INTO localgpt_messages ({MESSAGE_COLUMNS}, search) VALUES"
        " (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s::jsonb, %s, to_tsvector('simple', %s))",
        (m.id, m.conversation_id, m.seq, m.role, m.content, m.thinking, calls, m.tool_name,
         m.tool_call_id, dump(m.metadata), m.created_at, indexed),
    )  # fmt: skip


def tsquery(phrases: Sequence[Sequence[str]]) -> str | None:
    """The query phrases as tsquery text (words in a row: `<->`, all phrases: `&`).

    None when a phrase is empty (a query word without letters or digits), which matches
    nothing. The words are letters and digits only, so quoting cannot be broken.
    """
    if not phrases or any(not phrase for phrase in phrases):
        return None
    return " & ".join(
        "(" + " <-> ".join(f"'{word}'" for word in phrase) + ")" for phrase in phrases
    )


def import_into(conn: Any, conversation: Conversation, messages: Sequence[Message]) -> int:
    """Store an exported conversation under its own ids (in the caller's transaction).

    A conversation already here gains only the messages it lacks (by id), so importing
    the same export twice adds nothing; a message whose seq is taken by another message
    is a conflict, and nothing of the conversation is written. Returns how many
    messages were added.
    """
    c = conversation
    conn.execute(
        "INSERT INTO localgpt_conversations (id, title, model, created_at, updated_at, metadata)"
        " VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (id) DO NOTHING",
        (c.id, c.title, c.model, c.created_at, c.updated_at, dump(c.metadata)),
    )
    conn.execute("SELECT 1 FROM localgpt_conversations WHERE id = %s FOR UPDATE", (c.id,))
    have = dict(conn.execute(
        "SELECT seq, id FROM localgpt_messages WHERE conversation_id = %s", (c.id,)
    ).fetchall())  # fmt: skip
    new = missing_messages(c, messages, have)
    for m in new:
        insert_message(conn, m)
    if new:
        conn.execute(
            "UPDATE localgpt_conversations SET message_count = message_count + %s,"
            " updated_at = GREATEST(updated_at, %s), title = COALESCE(title, %s) WHERE id = %s",
            (len(new), c.updated_at, c.title, c.id),
        )
    return len(new)
