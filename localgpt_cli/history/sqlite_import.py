"""Storing an exported conversation in SQLite under its own ids (`history import`).

The rule is pg_rows.import_into's: a conversation already here gains only the messages
it lacks (by id), so importing one export twice adds nothing, and a message whose seq
is taken by another message is a conflict that leaves the conversation untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from localgpt_cli.history.rows import MESSAGE_COLUMNS, dump
from localgpt_cli.history.transfer import missing_messages
from localgpt_cli.history.types import Conversation, Message


def import_into(
    conn: sqlite3.Connection, conversation: Conversation, messages: Sequence[Message]
) -> int:
    """Insert what is missing (inside the caller's write transaction); returns how many
    messages were added. The message count and the full-text index follow by trigger."""
    c = conversation
    conn.execute(
        "INSERT OR IGNORE INTO conversations (id, title, model, created_at, updated_at, metadata)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (c.id, c.title, c.model, c.created_at, c.updated_at, dump(c.metadata)),
    )
    have = dict(conn.execute(
        "SELECT seq, id FROM messages WHERE conversation_id = ?", (c.id,)
    ).fetchall())  # fmt: skip
    new = missing_messages(c, messages, have)
    for m in new:
        calls = None if m.tool_calls is None else dump(m.tool_calls)
        conn.execute(
            f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (m.id, c.id, m.seq, m.role, m.content, m.thinking, calls, m.tool_name,
             m.tool_call_id, dump(m.metadata), m.created_at),
        )  # fmt: skip
    if new:
        conn.execute(
            "UPDATE conversations SET updated_at = max(updated_at, ?),"
            " title = COALESCE(title, ?) WHERE id = ?",
            (c.updated_at, c.title, c.id),
        )
    return len(new)
