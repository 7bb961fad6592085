"""How conversations and messages are laid out in SQLite rows, and read back.

The column lists, the JSON columns (metadata and tool calls, written with orjson), the
timestamp spelling and a conversation's title rule live here, so the store's queries
and its writes agree on one shape.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import orjson

from localgpt_cli.history.types import Message

TITLE_LENGTH = 60

CONVERSATION_COLUMNS = "id, title, model, message_count, created_at, updated_at"
MESSAGE_COLUMNS = (
    "id, conversation_id, seq, role, content, thinking, tool_calls, tool_name, "
    "tool_call_id, metadata, created_at, reply_to"
)


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


def dump(value: Any) -> str:
    """A JSON column's text."""
    # orjson: loading the 10,000 messages of a long conversation spends most of its
    # time decoding metadata, and orjson does that ~15x faster than json.
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def load_object(text: str) -> dict[str, Any]:
    """A JSON object column (metadata) as a dict."""
    return {} if text == "{}" else dict(orjson.loads(text))


def message_from_row(row: tuple[Any, ...]) -> Message:
    """A row selected with MESSAGE_COLUMNS as a Message."""
    mid, cid, seq, role, content, thinking, calls, tool_name, tool_call_id, meta, at, to = row
    return Message(mid, cid, seq, role, content, thinking,
                   None if calls is None else orjson.loads(calls), tool_name, tool_call_id,
                   load_object(meta), at, to)  # fmt: skip


def insert_message(conn: sqlite3.Connection, m: Message) -> None:
    """Insert one message row (inside the caller's write transaction); the message count
    and the full-text index follow by trigger."""
    calls = None if m.tool_calls is None else dump(m.tool_calls)
    conn.execute(
        f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (m.id, m.conversation_id, m.seq, m.role, m.content, m.thinking, calls, m.tool_name,
         m.tool_call_id, dump(m.metadata), m.created_at, m.reply_to),
    )  # fmt: skip


def replace_message(conn: sqlite3.Connection, m: Message) -> None:
    """Overwrite a stored message's fields with `m`'s (`history import --replace`)."""
    calls = None if m.tool_calls is None else dump(m.tool_calls)
    conn.execute(
        "UPDATE messages SET role = ?, content = ?, thinking = ?, tool_calls = ?,"
        " tool_name = ?, tool_call_id = ?, metadata = ?, reply_to = ? WHERE id = ?",
        (m.role, m.content, m.thinking, calls, m.tool_name, m.tool_call_id, dump(m.metadata),
         m.reply_to, m.id),
    )  # fmt: skip
