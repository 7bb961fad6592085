"""Naming a conversation (a full id, a unique prefix of one, or `latest`) or a message
(a full id or a unique prefix of one: `history mark`).

The rule is the same whatever the backend; each backend supplies only the lookups
(its newest conversation, the conversations or messages whose id starts with a prefix),
so a prefix is ambiguous, unknown or empty in the same words everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound
from localgpt_cli.history.types import Conversation, ConversationSummary, Message
from localgpt_cli.ids import normalize_prefix

# How many candidates an ambiguous prefix lists.
CANDIDATES_SHOWN = 10


def resolve(
    reference: str,
    *,
    latest: Callable[[], Conversation | None],
    starting_with: Callable[[str, int], Sequence[ConversationSummary]],
    get: Callable[[str], Conversation],
) -> Conversation:
    """The conversation `reference` names; case does not matter.

    `starting_with(prefix, n)` returns at most n conversations whose id starts with
    `prefix` (a normalised, upper-case prefix), newest id first. NotFound when nothing
    matches; AmbiguousId (listing the candidates, newest first) when several do.
    """
    text = reference.strip()
    if text.lower() == "latest":
        conversation = latest()
        if conversation is None:
            raise NotFound(
                "there are no conversations yet.", hint='`localgpt chat "…"` starts one.'
            )
        return conversation
    if not text:
        raise InvalidInput(
            "the conversation id is empty.", hint="Give an id, a prefix of one, or `latest`."
        )
    prefix = normalize_prefix(text)
    rows = [] if prefix is None else list(starting_with(prefix, CANDIDATES_SHOWN + 1))
    if not rows:
        raise NotFound(
            f"no conversation has an id starting with {text!r}.",
            hint="`localgpt history` lists them.",
        )
    if len(rows) > 1:
        shown = rows[:CANDIDATES_SHOWN]
        listed = "; ".join(f"{c.id} ({c.title or 'untitled'})" for c in shown)
        more = ", and more" if len(rows) > CANDIDATES_SHOWN else ""
        raise AmbiguousId(
            f"conversation id {text!r} is ambiguous: it starts {listed}{more}.",
            candidates=[c.id for c in shown],
            hint="Give more characters of the id.",
        )
    return get(rows[0].id)


def resolve_message(
    reference: str, starting_with: Callable[[str, int], Sequence[Message]]
) -> Message:
    """The message `reference` names (a full id or a unique prefix; case does not matter).

    `starting_with(prefix, n)` returns at most n messages whose id starts with `prefix`,
    newest id first. NotFound when nothing matches; AmbiguousId when several do, listing
    them with their role and first words (a person picks by what the message said).
    """
    text = reference.strip()
    where = "`localgpt history show ID --json` lists a conversation's messages with their ids."
    if not text:
        raise InvalidInput("the message id is empty.", hint=where)
    prefix = normalize_prefix(text)
    rows = [] if prefix is None else list(starting_with(prefix, CANDIDATES_SHOWN + 1))
    if not rows:
        raise NotFound(f"no message has an id starting with {text!r}.", hint=where)
    if len(rows) > 1:
        shown = rows[:CANDIDATES_SHOWN]
        listed = "; ".join(f"{m.id} ({m.role}: {_preview(m.content)})" for m in shown)
        more = ", and more" if len(rows) > CANDIDATES_SHOWN else ""
        raise AmbiguousId(
            f"message id {text!r} is ambiguous: it starts {listed}{more}.",
            candidates=[m.id for m in shown],
            hint="Give more characters of the id.",
        )
    return rows[0]


def _preview(content: str, width: int = 30) -> str:
    words = " ".join(content.split())
    return words[:width] + ("…" if len(words) > width else "") if words else "empty"


def merged_metadata(metadata: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`metadata` with `changes` merged in; a change whose value is None removes the key."""
    out = dict(metadata)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out
