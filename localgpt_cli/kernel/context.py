"""Prompt assembly: the fixed authority order, the history window and the token budget.

The authority order: system prompt -> project memory -> files named with --file -> S_ctx
or the retrieved excerpts (those four built by kernel/answer/prompt.py) -> earlier turns
-> the current user message. All but the earlier turns are pinned; which earlier turns go
is chosen by kernel/memory.py within the budget left, and only they are trimmed (oldest
first) if the estimate is still over, so a long conversation never pushes out the
instructions or the question.

Token counts are estimated, not tokenized: chat models use different tokenizers and
none is available without loading the model. `estimate_tokens` counts word-shaped
pieces; on English prose, code and Markdown it is within 0.94x-1.54x of a real WordPiece
tokenizer (tests/test_context.py measures that on Cranfield and this repository's code),
and the budget keeps a further 10% in hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]

_PIECE = re.compile(r"[A-Za-z]+|\d{1,3}|[^\W\d_A-Za-z]+|\n\s*|\S")
MESSAGE_OVERHEAD = 4  # role markers and separators each chat template adds
# What a picture costs in the prompt, estimated: vision encoders spend 256 (Gemma 3) to
# 576 (LLaVA) tokens on one, Qwen2.5-VL about one per 28x28 pixels (~1,000 at 1024 px).
IMAGE_TOKENS = 768
SAFETY = 0.9  # use at most 90% of the context for the estimated prompt + answer room
DEFAULT_WINDOW = 20
# Ollama's own default context when a request sets no num_ctx.
SERVER_DEFAULT_CTX = 4096


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of a text's token count (see the module docstring)."""
    n = 0
    for m in _PIECE.finditer(text):
        s = m.group()
        c = s[0]
        if c.isascii() and c.isalpha():
            n += 1 + len(s) // 7  # long words split into several sub-word tokens
        elif c == "\n" or c.isdigit():
            n += 1
        elif not c.isascii():
            # CJK and other ideographic scripts: about a token a character.
            n += len(s) if ord(c) >= 0x2E80 else 1 + len(s) // 2
        else:
            n += 1
    return n


def cut_middle(text: str, max_tokens: int, tokens: int | None = None) -> tuple[str, int]:
    """Head and tail of `text` within `max_tokens` (estimated), around a visible marker.

    Returns the text and how many characters were cut (0 when it fitted). Both ends are
    kept because the start of a log or a report often explains the rest and its end is
    the latest state; Ollama, given too much, silently keeps only the end. `tokens` is
    the caller's estimate of `text`, if it has one: estimating 2 MB takes half a second.
    """
    tokens = estimate_tokens(text) if tokens is None else tokens
    if tokens <= max_tokens:
        return text, 0
    ratio = len(text) / max(tokens, 1)  # characters per token of this very text
    target = max_tokens
    while True:
        keep = max(int(target * ratio) - 80, 200)
        head, tail = text[: keep // 2], text[-(keep // 2) :]
        removed = len(text) - len(head) - len(tail)
        out = f"{head}\n\n[… {removed:,} characters cut to fit the context …]\n\n{tail}"
        # Head and tail may be denser than the average: shrink until the estimate fits.
        over = estimate_tokens(out) - max_tokens
        if over <= 0 or keep == 200:
            return out, removed
        target -= over


def message_tokens(message: Message) -> int:
    total = MESSAGE_OVERHEAD + estimate_tokens(message.get("content") or "")
    if message.get("thinking"):
        total += estimate_tokens(message["thinking"])
    for call in message.get("tool_calls") or ():
        total += estimate_tokens(str(call))
    return total + IMAGE_TOKENS * len(message.get("images") or ())


@dataclass
class Assembled:
    """The messages to send, and what the window left out."""

    messages: list[Message]
    estimated_tokens: int
    dropped: int  # history messages trimmed for the budget or the window
    over_budget: bool  # even the pinned messages do not fit


def answer_room(context_length: int, options: dict[str, Any]) -> int:
    """Tokens kept free for the answer: num_predict when set, else a quarter (<= 2048)."""
    predict = options.get("num_predict")
    if isinstance(predict, int) and predict > 0:
        return min(predict, context_length // 2)
    return min(2048, context_length // 4)


def prompt_budget(context_length: int, options: dict[str, Any]) -> int:
    """Estimated tokens the prompt may take: the safe share of the context, less the
    answer's room."""
    return int(context_length * SAFETY) - answer_room(context_length, options)


def _units(history: Sequence[Message]) -> list[list[Message]]:
    """Group history so an assistant message and the tool results it asked for go together.

    A `tool` message without the assistant call before it (cut off by the window) is
    dropped: the model would see an answer to a question it never asked.
    """
    units: list[list[Message]] = []
    for message in history:
        if message.get("role") == "tool":
            if units and units[-1][0].get("tool_calls"):
                units[-1].append(message)
            continue
        units.append([message])
    return units


def assemble(
    pinned_before: Sequence[Message],
    history: Sequence[Message],
    current: Message,
    *,
    context_length: int,
    options: dict[str, Any] | None = None,
    window: int = DEFAULT_WINDOW,
) -> Assembled:
    """Build the message list: pinned system blocks, the window of history, the message."""
    options = options or {}
    budget = prompt_budget(context_length, options)
    recent = list(history[-window:]) if window > 0 else []
    dropped = len(history) - len(recent)
    units = _units(recent)
    dropped += len(recent) - sum(len(u) for u in units)
    fixed = sum(message_tokens(m) for m in pinned_before) + message_tokens(current)
    costs = [sum(message_tokens(m) for m in unit) for unit in units]
    used = fixed + sum(costs)
    start = 0
    while start < len(units) and used > budget:
        used -= costs[start]
        dropped += len(units[start])
        start += 1
    kept = [m for unit in units[start:] for m in unit]
    return Assembled(
        messages=[*pinned_before, *kept, current],
        estimated_tokens=used,
        dropped=dropped,
        over_budget=fixed > budget,
    )


def needed_num_ctx(
    estimated_tokens: int, context_length: int, options: dict[str, Any]
) -> int | None:
    """A num_ctx to send when the prompt would overflow the server's default context.

    Ollama runs a model with a 4096-token context unless told otherwise and silently
    drops the *start* of a longer prompt (the system prompt first). When our estimate
    says the prompt plus the answer room exceeds that, ask for the next power of two
    that fits, capped at the model's own context length.
    """
    if "num_ctx" in options:
        return None
    wanted = int((estimated_tokens + answer_room(context_length, options)) / SAFETY)
    if wanted <= SERVER_DEFAULT_CTX:
        return None
    size = SERVER_DEFAULT_CTX
    while size < wanted:
        size *= 2
    return min(size, context_length)
