"""Chat chunks shaped like the `ollama` client's ChatResponse, for normalizer tests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def chunk(
    content: str = "",
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    done: bool = False,
    done_reason: str | None = None,
) -> SimpleNamespace:
    calls = None
    if tool_calls:
        calls = [
            SimpleNamespace(function=SimpleNamespace(name=c["name"], arguments=c["arguments"]))
            for c in tool_calls
        ]
    return SimpleNamespace(
        message=SimpleNamespace(content=content, thinking=thinking, tool_calls=calls),
        done=done,
        done_reason=done_reason,
        prompt_eval_count=10 if done else None,
        eval_count=20 if done else None,
    )
