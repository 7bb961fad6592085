"""Storing an exported conversation in SQLite under its own ids (`history import`).

The rule is transfer.changes's, as in pg_rows.import_into: a conversation already here
gains only the messages it lacks (by id), so importing one export twice adds nothing; a
message whose seq is taken by another message, or one that says something else than its
stored copy (without `replace`), leaves the conversation untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from localgpt_cli.history.rows import (
    MESSAGE_COLUMNS,
    dump,
    insert_message,
    message_from_row,
    replace_message,
)
from localgpt_cli.history.transfer import changes
from localgpt_cli.history.types import Conversation, Message


def import_into(
    conn: sqlite3.Connection, conversation: Conversation, messages: Sequence[Message],
    replace: bool = False,
) -> int:
    """Insert what is missing and, with `replace`, overwrite what differs (inside the
    caller's write transaction); returns how many messages were written."""
    c = conversation
    conn.execute(
        "INSERT OR IGNORE INTO conversations (id, title, model, created_at, updated_at, metadata)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (c.id, c.title, c.model, c.created_at, c.updated_at, dump(c.metadata)),
    )
    have = {row[2]: message_from_row(row) for row in conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?", (c.id,))}
    ids = [m.id for m in messages]
    elsewhere = {row[0] for at in range(0, len(ids), 500) for row in conn.execute(
        "SELECT id FROM messages WHERE conversation_id <> ? AND id IN"
        f" ({','.join('?' * len(ids[at:at + 500]))})", (c.id, *ids[at:at + 500]))}
    new, replaced = changes(c, messages, have, replace=replace, elsewhere=elsewhere)
    for m in new:
        insert_message(conn, m)
    for m in replaced:
        replace_message(conn, m)
    if new:
        conn.execute(
            "UPDATE conversations SET updated_at = max(updated_at, ?),"
            " title = COALESCE(title, ?) WHERE id = ?",
            (c.updated_at, c.title, c.id),
        )
    return len(new) + len(replaced)
