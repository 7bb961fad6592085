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
from localgpt_cli.history.transfer import changes
from localgpt_cli.history.types import Conversation, Message

CONVERSATION_COLUMNS = "id, title, model, message_count, created_at, updated_at"
MESSAGE_COLUMNS = (
    "id, conversation_id, seq, role, content, thinking, tool_calls, tool_name, "
    "tool_call_id, metadata, created_at, reply_to"
)
# A tsvector holds at most 1 MB: a message is indexed by its first INDEX_WORDS words.
INDEX_WORDS = 50_000


def message_from_row(row: Sequence[Any]) -> Message:
    """A row selected with MESSAGE_COLUMNS as a Message."""
    mid, cid, seq, role, content, thinking, calls, tool_name, tool_call_id, meta, at, to = row
    return Message(mid, cid, seq, role, content, thinking, calls, tool_name, tool_call_id,
                   dict(meta), at, to)  # fmt: skip


def insert_message(conn: Any, m: Message) -> None:
    """Insert one message row with its search vector (inside the caller's transaction)."""
    indexed = " ".join(textsearch.words(m.content)[:INDEX_WORDS])
    calls = None if m.tool_calls is None else dump(m.tool_calls)
    conn.execute(
        f"INSERT INTO localgpt_messages ({MESSAGE_COLUMNS}, search) VALUES"
        " (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s::jsonb, %s, %s,"
        " to_tsvector('simple', %s))",
        (m.id, m.conversation_id, m.seq, m.role, m.content, m.thinking, calls, m.tool_name,
         m.tool_call_id, dump(m.metadata), m.created_at, m.reply_to, indexed),
    )  # fmt: skip


def replace_message(conn: Any, m: Message) -> None:
    """Overwrite a stored message's fields with `m`'s (`history import --replace`)."""
    indexed = " ".join(textsearch.words(m.content)[:INDEX_WORDS])
    calls = None if m.tool_calls is None else dump(m.tool_calls)
    conn.execute(
        "UPDATE localgpt_messages SET role = %s, content = %s, thinking = %s,"
        " tool_calls = %s::jsonb, tool_name = %s, tool_call_id = %s, metadata = %s::jsonb,"
        " reply_to = %s, search = to_tsvector('simple', %s) WHERE id = %s",
        (m.role, m.content, m.thinking, calls, m.tool_name, m.tool_call_id, dump(m.metadata),
         m.reply_to, indexed, m.id),
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


def import_into(conn: Any, conversation: Conversation, messages: Sequence[Message],
                replace: bool = False) -> int:  # fmt: skip
    """Store an exported conversation under its own ids (in the caller's transaction).

    The rule is transfer.changes's: a conversation already here gains only the messages
    it lacks (by id), so importing the same export twice writes nothing; a message whose
    seq is taken by another message, or (without `replace`) one that says something else
    than its stored copy, is a conflict, and nothing of the conversation is written.
    Returns how many messages were written.
    """
    c = conversation
    conn.execute(
        "INSERT INTO localgpt_conversations (id, title, model, created_at, updated_at, metadata)"
        " VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (id) DO NOTHING",
        (c.id, c.title, c.model, c.created_at, c.updated_at, dump(c.metadata)),
    )
    conn.execute("SELECT 1 FROM localgpt_conversations WHERE id = %s FOR UPDATE", (c.id,))
    have = {row[2]: message_from_row(row) for row in conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM localgpt_messages WHERE conversation_id = %s", (c.id,))}
    elsewhere = {row[0] for row in conn.execute(
        "SELECT id FROM localgpt_messages WHERE conversation_id <> %s AND id = ANY(%s)",
        (c.id, [m.id for m in messages]))}
    new, replaced = changes(c, messages, have, replace=replace, elsewhere=elsewhere)
    for m in new:
        insert_message(conn, m)
    for m in replaced:
        replace_message(conn, m)
    if new:
        conn.execute(
            "UPDATE localgpt_conversations SET message_count = message_count + %s,"
            " updated_at = GREATEST(updated_at, %s), title = COALESCE(title, %s) WHERE id = %s",
            (len(new), c.updated_at, c.title, c.id),
        )
    return len(new) + len(replaced)
