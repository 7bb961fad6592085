"""A conversation written out whole: JSON for programs, Markdown for people.

JSON keeps every stored field (the records of types.py plus the conversation's
metadata), so an export can be read back or diffed. Markdown reads like the chat
did: a heading per message, thinking folded into <details> so it does not drown
the answer, tool calls and tool output in code fences.
"""

from __future__ import annotations

import json
import re
from typing import Any

from localgpt_cli.history.types import Conversation, Message, image_lines
from localgpt_cli.pairing import paired

_HEADINGS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
# done reasons that mean the answer did not end normally ("incomplete": an answer row
# stored before streaming and never completed).
_UNFINISHED = {"length", "max_iterations", "loop_guard", "aborted", "error", "incomplete"}


def document(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    """`{"conversation": {...record, "metadata"}, "messages": [message records]}`: what
    `history import` reads back (transfer.py)."""
    return {
        "conversation": {**conversation.to_record(), "metadata": conversation.metadata},
        "messages": [m.to_record() for m in messages],
    }


def to_json(conversation: Conversation, messages: list[Message]) -> str:
    """The `document`, indented."""
    return json.dumps(document(conversation, messages), ensure_ascii=False, indent=2) + "\n"


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    parts = [
        f"# {conversation.title or 'Untitled conversation'}",
        "\n".join(
            [
                f"- id: `{conversation.id}`",
                f"- model: `{conversation.model}`",
                f"- created: {conversation.created_at}",
                f"- updated: {conversation.updated_at}",
            ]
        ),
    ]
    for message in paired(messages):  # each answer after its question (pairing.py)
        parts.extend(_message_blocks(message))
    return "\n\n".join(parts) + "\n"


def _message_blocks(message: Message) -> list[str]:
    heading = _HEADINGS[message.role]
    if message.role == "tool" and message.tool_name:
        heading += f": {message.tool_name}"
    blocks = [f"## {heading}"]
    if message.thinking:
        blocks.append(f"<details>\n<summary>Thinking</summary>\n\n{message.thinking}\n\n</details>")
    if message.content:
        blocks.append(
            _fence(message.content, "text") if message.role == "tool" else message.content
        )
    pictures = image_lines(message)
    if pictures:
        blocks.append("\n".join(f"- {line}" for line in pictures))
    for call in message.tool_calls or []:
        name, arguments = _call_parts(call)
        blocks.append(f"**Tool call:** `{name}`\n\n" + _fence(_pretty(arguments), "json"))
    reason = message.metadata.get("done_reason")
    if reason in _UNFINISHED:
        error = message.metadata.get("error")
        detail = f": {error['message']}" if isinstance(error, dict) and "message" in error else ""
        blocks.append(f"_(answer incomplete: {reason}{detail})_")
    return blocks


def _call_parts(call: dict[str, Any]) -> tuple[str, Any]:
    """Name and arguments of a tool call in Ollama's shape ({"function": {...}}) or flat."""
    function = call.get("function", call)
    if not isinstance(function, dict):
        return "?", call
    return str(function.get("name", "?")), function.get("arguments", {})


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _fence(text: str, language: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the text cannot end it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
