"""What the history store hands out: conversations, messages, search hits.

Each has `to_record()`, the flat dict written as one NDJSON line by `history --json`
(the record shapes are part of the output contract in README.md). Times are ISO 8601
UTC strings with milliseconds, e.g. "2026-11-22T19:42:58.123Z"; they sort as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ConversationSummary:
    """One line of `history list`: enough to recognise a conversation, nothing more."""

    id: str
    title: str | None
    model: str
    messages: int
    created_at: str
    updated_at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "type": "conversation",
            "id": self.id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "messages": self.messages,
            "model": self.model,
        }


@dataclass(frozen=True)
class Conversation(ConversationSummary):
    """A conversation with its free-form metadata (the summary's record, same shape)."""

    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """One stored message.

    `thinking` is kept apart from `content` so that the answer text (what the `token`
    packets spelled out) is stored byte for byte. `metadata` holds what the turn
    knew: by convention `sources`, `used_tools`, `usage`, `timings`, and `done_reason`
    (`stop`, `length`, `max_iterations`, `aborted`, `error`, or `incomplete` for a
    row added before streaming and never completed), with `error` ({"code",
    "message"}) when the answer ended in one. `reply_to` is the id of the user message
    an answer (or a tool step) answers: two writers on one conversation interleave
    (question, question, answer, answer), and this, not the order, pairs them
    (pairing.py); None for a question, or a message stored without one.
    """

    id: str
    conversation_id: str
    seq: int
    role: str
    content: str
    thinking: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_name: str | None
    tool_call_id: str | None
    metadata: dict[str, Any]
    created_at: str
    reply_to: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.id,
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "role": self.role,
            "content": self.content,
            "thinking": self.thinking,
            "tool_calls": self.tool_calls,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "reply_to": self.reply_to,
        }


def image_lines(message: Message) -> list[str]:
    """`image: a.png (image/png, 640x480, 1,234 bytes, sha256 3f9a1c2e…)` for each picture
    a message sent (its metadata `images`, kernel/pictures.py): what `history show` and
    the Markdown export say of them, the bytes being kept only with history.keep_images."""
    lines = []
    for ref in message.metadata.get("images") or ():
        if isinstance(ref, dict):
            size = ref.get("bytes")
            lines.append(f"image: {ref.get('source')} ({ref.get('media_type')}, "
                         f"{ref.get('width')}x{ref.get('height')}, "
                         f"{size if not isinstance(size, int) else format(size, ',')} bytes, "
                         f"sha256 {str(ref.get('sha256'))[:12]}…)")
    return lines


@dataclass(frozen=True)
class SearchHit:
    """A message that matched `history search`, with the matching words marked."""

    rank: int
    conversation_id: str
    title: str | None
    message_id: str
    seq: int
    role: str
    snippet: str
    created_at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "type": "search_hit",
            "rank": self.rank,
            "conversation_id": self.conversation_id,
            "title": self.title,
            "message_id": self.message_id,
            "seq": self.seq,
            "role": self.role,
            "snippet": self.snippet,
            "created_at": self.created_at,
        }
