"""The kernel's messages as the OpenAI wire wants them (llm/openai.py and llamacpp.py).

The kernel speaks Ollama's shape: tool calls without ids, arguments as objects, pictures
as `images: [bytes]` beside the text. OpenAI's has tool calls with ids and JSON-string
arguments, tool results pointing at those ids, and pictures as `image_url` content parts
carrying a `data:` URL (the only way to send a local picture over that wire).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any


def image_parts(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A message with pictures as OpenAI's content parts: its text, then each picture as
    an `image_url` with a `data:` URL (None without pictures: content stays a string)."""
    if not message.get("images"):
        return None
    from localgpt_cli.images import sniff

    text = message.get("content") or ""
    return [*([{"type": "text", "text": text}] if text else []), *(
        {"type": "image_url", "image_url": {"url": f"data:{sniff(data[:16])};base64,"
                                                   f"{base64.b64encode(data).decode()}"}}
        for data in message["images"])]


def wire_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernel's (Ollama-shaped) messages as OpenAI wants them: tool calls with ids and
    JSON-string arguments, tool results pointing at those ids."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of the last assistant's calls not yet answered
    for n, m in enumerate(messages):
        role = m.get("role")
        msg: dict[str, Any] = {"role": role, "content": image_parts(m) or m.get("content") or ""}
        if role == "assistant" and m.get("tool_calls"):
            calls: list[dict[str, Any]] = []
            for i, call in enumerate(m["tool_calls"]):
                fn = call.get("function", call)
                calls.append({"id": f"call_{n}_{i}", "type": "function", "function": {
                    "name": fn["name"], "arguments": json.dumps(fn.get("arguments") or {})}})
            msg["tool_calls"], pending = calls, [c["id"] for c in calls]
        elif role == "tool":
            msg["tool_call_id"] = pending.pop(0) if pending else f"call_{n}"
        out.append(msg)
    return out
