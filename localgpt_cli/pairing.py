"""Each question followed by its own answers, whatever order they were stored in.

Two processes writing one conversation interleave: questions q1 q2, then answers a1 a2,
in seq order. An answer (and a tool step) records the question it answers
(`history.types.Message.reply_to`), so `history show`, the Markdown export and the memory's replay
(kernel/memory.py) put it right after that question's turn instead of after whatever
was stored before it. A message without `reply_to` (a question, or one stored without
one) stays where its seq puts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

M = TypeVar("M")


def paired(messages: Sequence[M]) -> list[M]:
    """`messages` (in seq order) with every reply moved to just after its question's
    turn; a reply whose question is not among them stays in place. Any message-like
    object will do (one without `reply_to` is never moved)."""
    ids = {_attr(m, "id") for m in messages}
    replies: dict[str, list[M]] = {}
    heads: list[M] = []
    for m in messages:
        to = _attr(m, "reply_to")
        if to is not None and to != _attr(m, "id") and to in ids:
            replies.setdefault(to, []).append(m)
        else:
            heads.append(m)
    out: list[M] = []
    for m in heads:
        out.append(m)
        out.extend(replies.pop(_attr(m, "id"), []))
    if replies:  # a reply to a reply (not written by localgpt): kept, in stored order
        left = {id(m) for rest in replies.values() for m in rest}
        out.extend(m for m in messages if id(m) in left)
    return out


def _attr(message: Any, name: str) -> Any:
    return getattr(message, name, None)
