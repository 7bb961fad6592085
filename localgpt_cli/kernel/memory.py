"""Conversation memory: which earlier turns of a conversation go into the prompt.

A rolling window forgets a fact once it is N messages back, even when the user asks about
it directly. Two layers replace it:

- **G, recency**: the last `recent_turns` user-assistant turns, whole and in order (the
  thread of the conversation; never scored, never summarised).
- **E, episodic**: every older turn is a candidate, scored by its relevance to the current
  question (BM25 over the conversation's own turns, so it works on every history
  backend) times a soft fading weight over turn distance and, optionally, elapsed time.
  A turn marked important (`metadata["important"]` on any of its messages) does not fade.

Selection is token-budget-first: G takes what it needs of the budget left after the
system rules, project memory, files, sources and the question; then the best-scoring E
turns that still fit, after dropping those that repeat or contradict a `--file` of this
turn (FILES > newer > older). The prompt keeps chronological order. Every decision is in
`Recall.report`, the payload of the `memory` packet.

The scoring reads only the question's terms out of the turns (kernel/terms.py), the
turns are built from the stored messages in one pass, only the turns that can be kept or
are worth reporting become objects, and tokens are estimated only for turns that passed
the fading threshold, so selection stays under 20 ms at a thousand turns
(tests/bench/memory.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.kernel.conflicts import FileFacts, facts
from localgpt_cli.kernel.context import message_tokens
from localgpt_cli.kernel.facts import DEFAULT_SHARE
from localgpt_cli.kernel.terms import relevance
from localgpt_cli.pairing import paired

Chat = dict[str, Any]

# A turn with no word of the question still scores PRIOR x fade: recent turns keep the
# thread when the budget allows. MIN_SCORE is where a turn counts as faded: with the
# default half-life of 30 turns an unrelated turn fades after ~10 turns, one that matches
# the question well (relevance >= 0.5) after ~90, an important one never.
PRIOR = 0.1
MIN_SCORE = 0.08
DROPPED_SHOWN = 20  # the report lists at most this many dropped turns, best first


@dataclass(frozen=True)
class MemorySettings:
    """`[memory]` in config.toml: how many turns are G, and how fast E fades."""

    recent_turns: int = 4
    half_life_turns: float = 30.0
    half_life_days: float | None = None
    project_share: float = DEFAULT_SHARE  # of the prompt budget, for project memory's facts


@dataclass
class Episode:
    """One earlier turn: a user message and everything that answered it."""

    number: int  # 1-based position in the conversation
    messages: list[Chat]  # as sent to the model (tool calls and results together)
    message_ids: list[str]
    created_at: str
    important: bool
    text: str = ""  # what the turn says, for scoring: contents joined
    tokens: int | None = None

    def cost(self) -> int:
        if self.tokens is None:
            self.tokens = sum(message_tokens(m) for m in self.messages)
        return self.tokens


@dataclass
class Recall:
    """The earlier messages to send, in order, and the `memory` packet's payload."""

    messages: list[Chat]
    report: dict[str, Any] = field(default_factory=dict)


def replay(messages: Sequence[Any]) -> list[Chat]:
    """Stored messages -> chat messages for the model.

    Thinking is not sent back (Ollama strips it from earlier turns anyway), and an
    assistant message that ended before saying anything is left out.
    """
    return [chat for chat in map(_chat, messages) if chat is not None]


def _chat(m: Any) -> Chat | None:
    if m.role == "assistant" and not m.content and not m.tool_calls:
        return None
    chat: Chat = {"role": m.role, "content": m.content}
    if m.tool_calls:
        chat["tool_calls"] = m.tool_calls
    if m.tool_name:
        chat["tool_name"] = m.tool_name
    return chat


def episodes(stored: Sequence[Any]) -> list[Episode]:
    """Stored messages (history `Message`s) -> turns. A turn starts at each user message;
    `replay` turns its messages into what the model is sent (or nothing). One pass: at
    a thousand turns this is a fifth of the selection time."""
    out: list[Episode] = []
    number = 0
    for message in paired(stored):  # each answer after its own question (pairing.py)
        if message.role == "user" or not number:
            number += 1
            turn = Episode(number, [], [], message.created_at, False)
            out.append(turn)
        turn.message_ids.append(message.id)
        if message.metadata.get("important") is True:
            turn.important = True
        chat = _chat(message)
        if chat is not None:
            turn.messages.append(chat)
    for turn in out:
        turn.text = "\n".join([c["content"] for c in turn.messages if c["content"]])
    return [turn for turn in out if turn.messages]


def _age_days(created_at: str, now: datetime) -> float:
    try:
        when = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max((now - when).total_seconds() / 86400, 0.0)


def fade(episode: Episode, distance: int, settings: MemorySettings, now: datetime) -> float:
    """The soft fading weight: halves every `half_life_turns` turns back (and every
    `half_life_days` days, when set); 1 for an important turn."""
    if episode.important:
        return 1.0
    weight = 0.5 ** (distance / settings.half_life_turns)
    if settings.half_life_days:
        weight *= 0.5 ** (_age_days(episode.created_at, now) / settings.half_life_days)
    return weight


@dataclass
class _Scored:
    episode: Episode
    distance: int
    relevance: float
    fade: float

    @property
    def score(self) -> float:
        return self.fade * (PRIOR + self.relevance)

    def entry(self, **extra: Any) -> dict[str, Any]:
        return {"turn": self.episode.number, "message_id": self.episode.message_ids[0],
                "score": round(self.score, 4), "relevance": round(self.relevance, 4),
                "fade": round(self.fade, 4), "important": self.episode.important, **extra}


def recall(
    turns: Sequence[Episode],
    question: str,
    budget: int,
    settings: MemorySettings,
    *,
    files: Sequence[tuple[str, str]] = (),
    max_messages: int | None = None,
    now: datetime | None = None,
) -> Recall:
    """Choose the earlier turns for this question within `budget` estimated tokens.

    `files` are the (path, text) of the --file contents of this turn; `max_messages`
    caps the history messages sent (the `--window` setting).
    """
    now = now or datetime.now(timezone.utc)
    cap = len(turns) * 1000 if max_messages is None else max_messages
    split = max(len(turns) - settings.recent_turns, 0)
    recent, older = turns[split:], turns[:split]
    report: dict[str, Any] = {"recent": [], "kept": [], "dropped": [], "candidates": len(older)}
    kept_recent, used, count = _recent(recent, budget, cap, report)
    scores = relevance([e.text for e in older], question)
    eligible, faded = _score(older, scores, len(turns), settings, now)
    dropped = [_Scored(*args).entry(reason="faded")
               for _, _, args in heapq.nsmallest(DROPPED_SHOWN, faded)]
    eligible = _dedup(eligible, kept_recent, files, dropped)
    chosen: list[_Scored] = []
    for s in sorted(eligible, key=lambda s: -s.score):
        n = len(s.episode.messages)
        if count + n > cap:  # --window: the messages sent are capped, whatever they cost
            dropped.append(s.entry(reason="window"))
            continue
        # At least a token a word: a turn that cannot fit is not estimated exactly.
        if used + len(s.episode.text.split()) > budget:
            dropped.append(s.entry(reason="budget"))
            continue
        cost = s.episode.cost()
        if used + cost > budget:
            dropped.append(s.entry(reason="budget", tokens=cost))
            continue
        used, count = used + cost, count + n
        chosen.append(s)
    chosen.sort(key=lambda s: s.episode.number)
    report["kept"] = [s.entry(tokens=s.episode.cost()) for s in chosen]
    dropped.sort(key=lambda d: -d["score"])
    report["dropped"] += dropped[:DROPPED_SHOWN]
    total = len(dropped) - min(len(faded), DROPPED_SHOWN) + len(faded)
    if total > DROPPED_SHOWN:
        report["more_dropped"] = total - DROPPED_SHOWN
    report.update(budget=max(budget, 0), tokens=used)
    messages = [m for s in chosen for m in s.episode.messages]
    messages += [m for e in kept_recent for m in e.messages]
    return Recall(messages, report)


def _score(
    older: Sequence[Episode], scores: Sequence[float], total: int, settings: MemorySettings,
    now: datetime,
) -> tuple[list[_Scored], list[tuple[float, int, tuple[Episode, int, float, float]]]]:
    """The older turns that may be kept, and the faded ones (with a word of the question
    or none: a turn left out for zero relevance is still left out, and the report says
    so) as (-score, position, _Scored arguments): only the best DROPPED_SHOWN of a
    thousand become entries."""
    eligible: list[_Scored] = []
    faded: list[tuple[float, int, tuple[Episode, int, float, float]]] = []
    for i, (episode, r) in enumerate(zip(older, scores, strict=True)):
        weight = fade(episode, total - i, settings, now)
        if weight * (PRIOR + r) >= MIN_SCORE:
            eligible.append(_Scored(episode, total - i, r, weight))
        else:
            faded.append((-weight * (PRIOR + r), i, (episode, total - i, r, weight)))
    return eligible, faded


def _recent(
    recent: Sequence[Episode], budget: int, cap: int, report: dict[str, Any]
) -> tuple[list[Episode], int, int]:
    """G: the last turns, newest first while they fit the budget and the message cap; a
    turn that does not fit ends G (the thread is never holed)."""
    kept: list[Episode] = []
    used = count = 0
    full: str | None = None  # why G ended: "budget" or "window" (the --window cap)
    for episode in reversed(recent):
        n, cost = len(episode.messages), episode.cost()
        if full is None and (used + cost > budget or count + n > cap):
            full = "window" if count + n > cap else "budget"
        if full:
            report["dropped"].append({"turn": episode.number, "message_id": episode.message_ids[0],
                                      "recent": True, "reason": full, "tokens": cost})
            continue
        kept.append(episode)
        used, count = used + cost, count + n
    kept.reverse()
    report["recent"] = [e.number for e in kept]
    return kept, used, count


def _dedup(
    eligible: list[_Scored], recent: Sequence[Episode], files: Sequence[tuple[str, str]],
    dropped: list[dict[str, Any]],
) -> list[_Scored]:
    """Drop the E turns that repeat or contradict a --file (the file wins), then those
    that contradict a newer turn (the newer wins)."""
    on_file = FileFacts.of(files) if files else None
    newest_first = sorted(eligible, key=lambda s: -s.episode.number)
    known: dict[str, tuple[str, int]] = {}
    for episode in reversed(recent):
        for key, value in facts(episode.text).items():
            known.setdefault(key, (value, episode.number))
    keep = []
    for s in newest_first:
        said = facts(s.episode.text)
        if on_file is not None:
            path = on_file.repeated_in(s.episode.messages)
            if path is not None:
                dropped.append(s.entry(reason="duplicate_of_file", file=path))
                continue
            clash = on_file.contradicted(said)
            if clash is not None:
                dropped.append(s.entry(reason="conflict", file=clash))
                continue
        newer = next(((k, known[k][1]) for k, v in said.items()
                      if k in known and known[k][0] != v), None)  # fmt: skip
        if newer is not None:
            dropped.append(s.entry(reason="conflict", newer_turn=newer[1], key=newer[0]))
            continue
        for key, value in said.items():
            known.setdefault(key, (value, s.episode.number))
        keep.append(s)
    return keep


def memory_settings(values: dict[str, Any], sources: dict[str, str]) -> MemorySettings:
    """The `memory.*` settings; values that would make no sense are refused, naming where
    they came from."""
    for key, strict in (("memory.recent_turns", False), ("memory.half_life_turns", True),
                        ("memory.half_life_days", True)):  # fmt: skip
        value = values.get(key)
        if value is not None and not (0 < value < math.inf or (value == 0 and not strict)):
            bound = "> 0" if strict else ">= 0"
            raise InvalidInput(f"Setting {key!r} from {sources.get(key, 'default')} must be a "
                               f"finite number {bound}, got {value!r}.")
    return MemorySettings(
        recent_turns=int(values.get("memory.recent_turns", 4)),
        half_life_turns=float(values.get("memory.half_life_turns", 30.0)),
        half_life_days=values.get("memory.half_life_days"),
        project_share=_share(values, sources),
    )


def _share(values: dict[str, Any], sources: dict[str, str]) -> float:
    """`memory.project_share`: a fraction of the prompt above 0, at most 1."""
    share = values.get("memory.project_share", DEFAULT_SHARE)
    if share is None or not 0 < share <= 1:
        raise InvalidInput(f"Setting 'memory.project_share' from "
                           f"{sources.get('memory.project_share', 'default')} must be a "
                           f"fraction of the prompt above 0 and at most 1, got {share!r}.")
    return float(share)
