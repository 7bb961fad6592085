"""The StreamPacket model and factory: the four-key objects `chat --json` writes.

A packet is a plain dict (a TypedDict for the type checker) rather than a class: the
NDJSON writer hands it straight to orjson, and the streaming path makes one per token,
so construction cost is the packet rate.
"""

from __future__ import annotations

import time
from typing import Any, Literal, TypedDict

from localgpt_cli.ids import new_id

PacketType = Literal[
    "token", "thought", "sources", "memory", "tool_start", "tool_result", "error", "done"
]
PACKET_TYPES: tuple[str, ...] = (
    "token", "thought", "sources", "memory", "tool_start", "tool_result", "error", "done",
)
DONE_REASONS: tuple[str, ...] = (
    "stop", "length", "max_iterations", "loop_guard", "aborted", "error",
)


class StreamPacket(TypedDict):
    id: str
    type: PacketType
    payload: Any
    timestamp: int


class PacketFactory:
    """Makes the packets of one turn: ids `<turn id>:<sequence>` counting from 0, no gaps."""

    __slots__ = ("turn_id", "_seq")

    def __init__(self, turn_id: str | None = None) -> None:
        self.turn_id = turn_id or new_id()
        self._seq = 0

    def make(self, type: PacketType, payload: Any) -> StreamPacket:
        seq = self._seq
        self._seq = seq + 1
        return {
            "id": f"{self.turn_id}:{seq:04d}",
            "type": type,
            "payload": payload,
            "timestamp": time.time_ns() // 1_000_000,
        }

    def token(self, text: str) -> StreamPacket:
        return self.make("token", text)

    def thought(self, text: str) -> StreamPacket:
        return self.make("thought", text)

    def error(self, code: str, message: str, retryable: bool) -> StreamPacket:
        return self.make("error", {"code": code, "message": message, "retryable": retryable})

    def done(
        self,
        reason: str,
        *,
        model: str,
        provider: str = "ollama",
        conversation_id: str | None = None,
        message_id: str | None = None,
        iterations: int = 1,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        first_token_ms: int | None = None,
        total_ms: int | None = None,
        used_tools: list[str] | None = None,
        cut: list[dict[str, Any]] | None = None,
        selection: dict[str, Any] | None = None,
        grounded: bool | None = None,
        files: dict[str, Any] | None = None,
        store_error: dict[str, Any] | None = None,
        structured: Any = None,
    ) -> StreamPacket:
        payload: dict[str, Any] = {
            "reason": reason,
            "conversation_id": conversation_id,
            "message_id": message_id,
            "model": model,
            "provider": provider,
            "iterations": iterations,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
            "timings": {"first_token_ms": first_token_ms, "total_ms": total_ms},
            "used_tools": used_tools or [],
        }
        if cut:  # what was cut to fit the context: only when something was
            payload["cut"] = cut
        if selection is not None:  # how the offered tools were chosen: only with tools
            payload["selection"] = selection
        if grounded is not None:  # only when the knowledge base was searched
            payload["grounded"] = grounded
        if files is not None:  # only when the current folder ($HOME, /) was not a root
            payload["files"] = files
        if store_error is not None:  # the answer was not stored: why (the exit code's error)
            payload["store_error"] = store_error
        if structured is not None:  # --schema: the validated answer, as a value
            payload["structured"] = structured
        return self.make("done", payload)
