"""Naming a conversation (a full id, a unique prefix of one, or `latest`) or a message
(a full id or a unique prefix of one: `history mark`).

The rule is the same whatever the backend; each backend supplies only the lookups
(its newest conversation, the conversations or messages whose id starts with a prefix),
so a prefix is ambiguous, unknown or empty in the same words everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound
from localgpt_cli.history.types import Conversation, ConversationSummary, Message
from localgpt_cli.ids import normalize_prefix

# How many candidates an ambiguous prefix lists.
CANDIDATES_SHOWN = 10
Row = TypeVar("Row", ConversationSummary, Message)


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
    found = _one(text, starting_with, "conversation", "`localgpt history` lists them.",
                 lambda c: c.title or "untitled")  # fmt: skip
    return get(found.id)


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
    return _one(text, starting_with, "message", where,
                lambda m: f"{m.role}: {_preview(m.content)}")  # fmt: skip


def _one(text: str, starting_with: Callable[[str, int], Sequence[Row]], kind: str,
         hint: str, describe: Callable[[Row], str]) -> Row:  # fmt: skip
    """The one row whose id starts with `text`: NotFound when none does, AmbiguousId when
    several do, listing them (newest first) with `describe` so a person can pick."""
    prefix = normalize_prefix(text)
    rows = [] if prefix is None else list(starting_with(prefix, CANDIDATES_SHOWN + 1))
    if not rows:
        raise NotFound(f"no {kind} has an id starting with {text!r}.", hint=hint)
    if len(rows) > 1:
        shown = rows[:CANDIDATES_SHOWN]
        listed = "; ".join(f"{r.id} ({describe(r)})" for r in shown)
        more = ", and more" if len(rows) > CANDIDATES_SHOWN else ""
        raise AmbiguousId(
            f"{kind} id {text!r} is ambiguous: it starts {listed}{more}.",
            candidates=[r.id for r in shown],
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
