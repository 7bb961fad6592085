"""When an earlier turn repeats or contradicts a file given with --file.

The file is what the user put in front of the model *now*; an old turn that says the same
costs tokens for nothing, and one that says otherwise ("the build server is atlas-7"
against a file saying `build server: atlas-9`) would make the model hedge or pick the
stale value. Both are dropped from memory, and the drop is reported (FILES > newer >
older, the issue's authority order).

Repeats are found with word 5-gram shingles; contradictions with simple statements of a
value: `KEY is [called|named] VALUE`, `KEY: VALUE`, `KEY = VALUE`, one per sentence or
line, the key reduced to its last three content words; a one-word key counts only with
"called"/"named" or a name-like value (a digit, `-`, `.`, `/`, `:` or `@` in it). That
is deliberately narrow: a missed contradiction costs what the window cost before, a false
one a turn that stays visible in the `memory` packet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SHINGLE = 5
REPEAT_SHARE = 0.5  # a message with at least half its shingles in a file repeats it
MIN_SHINGLES = 4  # shorter messages are not judged (too little to say it repeats)
MAX_LINE = 300  # longer sentences are not read as statements of a value

_WORD = re.compile(r"[^\W_]+(?:[-.'/:][^\W_]+)*")
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n")
_VERB = re.compile(
    r"^(?P<key>.{1,80}?)\s+(?:is|are|was|were)(?:\s+(?:now|still|actually))?"
    r"(?P<naming>\s+(?:called|named|set\s+to))?\s+(?P<value>\S.*)$",
    re.IGNORECASE,
)
_NAME_LIKE = re.compile(r"[\d\-._/:@]")  # atlas-7, 8080, v1.2, /srv/app, ops@host
_ASSIGN = re.compile(r"^(?P<key>[^:=]{1,60}?)\s*[:=]\s*(?P<value>\S.*)$")
_KEY_SEPARATORS = ",;:("  # the key is what follows the last of these
_ARTICLES = frozenset({"a", "an", "the", "now", "still", "actually"})
_NOT_KEYS = frozenset({
    "a", "an", "the", "my", "our", "your", "their", "his", "her", "its", "this", "that",
    "these", "those", "it", "he", "she", "they", "we", "i", "you", "what", "which", "who",
    "there", "here", "and", "or", "but", "so", "then", "also"
})
_NOT_VALUES = frozenset({"not", "no", "never", "also", "too", "that", "this", "it"})


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _after_last_separator(key: str) -> str:
    """What follows the last of _KEY_SEPARATORS (a clause holds no newline), found with
    rfind: `re.sub(".*[,;:(]", ...)` retried at every position, quadratic in the key."""
    return key[max(key.rfind(c) for c in _KEY_SEPARATORS) + 1 :]


def shingles(text: str) -> set[int]:
    """Hashes of the text's word 5-grams."""
    words = _words(text)
    # The shifted lists zipped (up to the shortest: the last whole 5-gram) give the same
    # tuples as words[i : i + SHINGLE], made in C.
    return set(map(hash, zip(*(words[i:] for i in range(SHINGLE)), strict=False)))


def facts(text: str) -> dict[str, str]:
    """The statements of a value in `text`: normalised key -> value (the last one wins)."""
    out: dict[str, str] = {}
    for clause in _CLAUSE.split(text):
        clause = clause.strip(" \t-*#>`\"'")
        if not clause or len(clause) > MAX_LINE:
            continue
        m = _VERB.match(clause)
        if m is None and ("=" in clause or ":" in clause):  # _ASSIGN's own test, cheaper
            m = _ASSIGN.match(clause)
        if m is None:
            continue
        key = _after_last_separator(m.group("key"))
        key_words = [w for w in _words(key) if w not in _NOT_KEYS]
        values = [w for w in _words(m.group("value")) if w not in _ARTICLES]
        if not key_words or not values or values[0] in _NOT_VALUES:
            continue
        if len(_words(key)) > 6:
            continue  # a long clause before "is" is prose, not a name for a value
        if not (m.groupdict().get("naming") or len(key_words) > 1 or _NAME_LIKE.search(values[0])):
            continue  # "the capital is Paris" then "is Lima" may be two countries, not news
        out[" ".join(key_words[-3:])] = values[0].rstrip(".:")
    return out


@dataclass
class FileFacts:
    """The shingles and value statements of this turn's --file contents."""

    paths: list[str]
    shingles: list[set[int]]
    values: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # key -> path -> values

    @classmethod
    def of(cls, files: Sequence[tuple[str, str]]) -> FileFacts:
        out = cls([p for p, _ in files], [shingles(t) for _, t in files])
        for path, text in files:
            for clause in text.splitlines():
                for key, value in facts(clause).items():
                    out.values.setdefault(key, {}).setdefault(path, set()).add(value)
        return out

    def repeated_in(self, messages: Sequence[dict[str, Any]]) -> str | None:
        """The file a message of the turn mostly repeats, if any."""
        for message in messages:
            own = shingles(message.get("content") or "")
            if len(own) < MIN_SHINGLES:
                continue
            for path, theirs in zip(self.paths, self.shingles, strict=True):
                if len(own & theirs) >= REPEAT_SHARE * len(own):
                    return path
        return None

    def contradicted(self, said: dict[str, str]) -> str | None:
        """The file that gives another value for something the turn states, if any."""
        for key, value in said.items():
            for path, values in self.values.get(key, {}).items():
                if value not in values:
                    return path
        return None
