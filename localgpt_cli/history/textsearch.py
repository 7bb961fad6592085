"""Words, matching and snippets for the backends without FTS5 (memory, PostgreSQL).

FTS5's `unicode61 remove_diacritics 2` tokenizer sets the rule the SQLite store
follows: a word is a run of letters and digits, case and accents do not matter, and
every query word must be present (a query word of several words, `work.conf`, is those
words in a row). The same rule is spelled here once, so `history search` finds the
same messages whichever backend keeps them, and its snippets look the same.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from localgpt_cli.errors import InvalidInput
from localgpt_cli.history.search import SNIPPET_TOKENS

_WORD = re.compile(r"[^\W_]+")


def fold(word: str) -> str:
    """A word as it is indexed: accents dropped, case folded."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, folded word) of each word of `text` (normalised to NFC first)."""
    return [(m.start(), m.end(), fold(m.group())) for m in _WORD.finditer(text)]


def words(text: str) -> list[str]:
    """The folded words of `text`, in order."""
    if text.isascii():  # most messages: folding is lower-casing, 20x faster than fold()
        return _WORD.findall(text.lower())
    return [m for _, _, m in spans(unicodedata.normalize("NFC", text))]


def query_phrases(text: str) -> list[list[str]]:
    """The query as phrases of folded words: one phrase per space-separated query word.

    Empty text is InvalidInput; a query word without letters or digits becomes an empty
    phrase, which matches nothing (as in FTS5).
    """
    parts = text.replace("\x00", " ").split()
    if not parts:
        raise InvalidInput("nothing to search for: the search text is empty.")
    return [words(part) for part in parts]


def matches(phrases: Sequence[Sequence[str]], folded: Sequence[str]) -> bool:
    """Whether every phrase occurs, its words in a row, in the folded words of a message."""
    for phrase in phrases:
        if not phrase:
            return False
        n = len(phrase)
        if not any(list(folded[i : i + n]) == list(phrase) for i in range(len(folded) - n + 1)):
            return False
    return True


def score(phrases: Sequence[Sequence[str]], folded: Sequence[str]) -> float:
    """How well a matching message matches: term frequency damped by length (higher is better)."""
    counts = Counter(folded)
    wanted = {w for phrase in phrases for w in phrase}
    return sum(counts[w] for w in wanted) / (1.0 + math.log(1 + len(folded)))


def snippet(text: str, phrases: Sequence[Sequence[str]], highlight: tuple[str, str]) -> str:
    """Up to SNIPPET_TOKENS words of `text` around the most matches, matched words marked.

    An ellipsis marks text left out at either end, as FTS5's snippet() does.
    """
    text = unicodedata.normalize("NFC", text)
    found = spans(text)
    if not found:
        return text
    wanted = {w for phrase in phrases for w in phrase}
    hits = [i for i, (_, _, w) in enumerate(found) if w in wanted]
    first = 0
    if len(found) > SNIPPET_TOKENS and hits:
        first = max(range(len(found) - SNIPPET_TOKENS + 1),
                    key=lambda s: (sum(s <= h < s + SNIPPET_TOKENS for h in hits), -s))
    last = min(len(found), first + SNIPPET_TOKENS) - 1
    start = 0 if first == 0 else found[first][0]
    end = len(text) if last == len(found) - 1 else found[last][1]
    out, at = [], start
    for i in range(first, last + 1):
        s, e, w = found[i]
        if w in wanted:
            out += [text[at:s], highlight[0], text[s:e], highlight[1]]
            at = e
    out.append(text[at:end])
    return ("…" if first else "") + "".join(out) + ("…" if end < len(text) else "")
