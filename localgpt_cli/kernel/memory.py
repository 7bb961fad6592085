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

The scoring reads only the question's terms out of each turn (one regex pass), and
tokens are estimated only for turns that passed the fading threshold, so selection
stays in milliseconds at a thousand turns (tests/bench/memory.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.kernel.conflicts import FileFacts, facts
from localgpt_cli.kernel.context import message_tokens

Chat = dict[str, Any]

# A turn with no word of the question still scores PRIOR x fade: recent turns keep the
# thread when the budget allows. MIN_SCORE is where a turn counts as faded: with the
# default half-life of 30 turns an unrelated turn fades after ~10 turns, one that matches
# the question well (relevance >= 0.5) after ~90, an important one never.
PRIOR = 0.1
MIN_SCORE = 0.08
RELEVANCE_HALF = 3.0  # the BM25 score at which relevance is 0.5 (saturating, in [0, 1))
BM25_K1, BM25_B = 1.2, 0.75
DROPPED_SHOWN = 20  # the report lists at most this many dropped turns, best first

STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can",
    "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how",
    "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my",
    "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through",
    "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "please", "tell", "know", "remember"
})
# Punctuation read as a space (not `-`, so `atlas-7` stays one word; not `_`): every word
# of a text then starts after a space, and `re` finds " term" by its literal prefix.
_SPACES = str.maketrans(dict.fromkeys(
    "!\"#$%&'()*+,./:;<=>?@[\\]^`{|}~\n\t\r", " "))


@dataclass(frozen=True)
class MemorySettings:
    """`[memory]` in config.toml: how many turns are G, and how fast E fades."""

    recent_turns: int = 4
    half_life_turns: float = 30.0
    half_life_days: float | None = None


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
    out: list[Chat] = []
    for m in messages:
        if m.role == "assistant" and not m.content and not m.tool_calls:
            continue
        chat: Chat = {"role": m.role, "content": m.content}
        if m.tool_calls:
            chat["tool_calls"] = m.tool_calls
        if m.tool_name:
            chat["tool_name"] = m.tool_name
        out.append(chat)
    return out


def episodes(stored: Sequence[Any]) -> list[Episode]:
    """Stored messages (history `Message`s) -> turns. A turn starts at each user message;
    `replay` turns its messages into what the model is sent (or nothing)."""
    groups: list[list[Any]] = []
    marked: set[int] = set()  # the groups holding a message marked important
    for message in stored:
        if message.role == "user" or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
        if message.metadata.get("important") is True:
            marked.add(len(groups))
    out = []
    for number, group in enumerate(groups, 1):
        chats = replay(group)
        if chats:
            out.append(Episode(
                number, chats, [m.id for m in group], group[0].created_at, number in marked,
                "\n".join([c["content"] for c in chats if c["content"]]),
            ))  # fmt: skip
    return out


def query_terms(question: str) -> list[str]:
    """The question's content words, lower-cased, a plural `s` stripped, each once."""
    out: dict[str, None] = {}
    for word in question.lower().translate(_SPACES).split():
        word = word.strip("-")
        if not word or word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        out[_stem(word)] = None
    return list(out)


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def relevance(texts: Sequence[str], question: str) -> list[float]:
    """BM25 of each text for the question, mapped to [0, 1): s / (s + RELEVANCE_HALF).

    Only the question's own terms are looked for (a substring test, then a whole-word
    count in the turns that have it; one regex alternation over a thousand turns cost 30
    ms), and a text's length is counted in spaces: the point is not to tokenize every
    turn for every question.
    """
    terms = query_terms(question)
    if not terms or not texts:
        return [0.0] * len(texts)
    lowered = [t.lower() for t in texts]
    # Punctuation to spaces only in the turns that hold a term at all.
    for i, text in enumerate(lowered):
        if any(term in text for term in terms):
            lowered[i] = " " + text.translate(_SPACES)
    counts: list[dict[str, int]] = [{} for _ in texts]
    df = dict.fromkeys(terms, 0)
    for term in terms:
        # A literal first: a lookbehind there would make `re` try every position (30x).
        whole = re.compile(rf" {re.escape(term)}(?:e?s)?(?![\w-])")
        for tf, text in zip(counts, lowered, strict=True):
            if term in text:  # a substring test first: most turns lack most terms
                n = len(whole.findall(text))
                if n:
                    tf[term] = n
                    df[term] += 1
    lengths = [len(text) + 1 for text in texts]  # characters: only the ratio to the mean counts
    average = sum(lengths) / len(lengths)
    n = len(texts)
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    out = []
    for tf, length in zip(counts, lengths, strict=True):
        if not tf:
            out.append(0.0)
            continue
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        s = sum(idf[t] * f * (BM25_K1 + 1) / (f + norm) for t, f in tf.items())
        out.append(s / (s + RELEVANCE_HALF))
    return out


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
    scored = [
        _Scored(e, len(turns) - i, r, fade(e, len(turns) - i, settings, now))
        for i, (e, r) in enumerate(zip(older, scores, strict=True))
    ]
    eligible = [s for s in scored if s.score >= MIN_SCORE]
    faded = [s for s in scored if s.score < MIN_SCORE and s.relevance > 0]
    faded.sort(key=lambda s: -s.score)
    dropped = [s.entry(reason="faded") for s in faded[:DROPPED_SHOWN]]
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


PROJECT_HEADER = (
    "Project memory: facts the user keeps for this work. They hold unless the user says "
    "otherwise in this conversation, and they outrank the files, sources and earlier "
    "turns below."
)


def project_block(facts: Sequence[str]) -> str:
    """The one system message that carries project memory (`localgpt memory add`)."""
    return "\n".join([PROJECT_HEADER, *(f"- {fact}" for fact in facts)])


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
    )
