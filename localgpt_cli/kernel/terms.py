"""Relevance of earlier turns to a question: BM25 over the turns' own text.

Conversation memory (memory.py) scores every older turn of a conversation for each new
question, on every history backend, so this needs no index: only the question's terms
are looked for, each with one regex over all the turns joined (the literal term first,
so `re` skips ahead by it) and the per-turn counts taken in C (a Python step per turn or
per occurrence cost more than the search itself: a common word occurs thousands of
times in a thousand turns). A turn's length is counted in characters. A term counts as
a word that starts after a space, punctuation or the start of the turn, with an optional
plural `s`/`es`, and nothing word-like after; the same rule the question's own words go
through (`query_terms`). Selection at 1,000 turns: tests/bench/memory.py.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Sequence
from functools import partial
from itertools import accumulate, compress
from operator import sub

RELEVANCE_HALF = 3.0  # the BM25 score at which relevance is 0.5 (saturating, in [0, 1))
BM25_K1, BM25_B = 1.2, 0.75

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
# Punctuation read as a space (not `-`, so `atlas-7` stays one word; not `_`): a word
# starts after one of these (or at the start of the text).
_PUNCTUATION = "!\"#$%&'()*+,./:;<=>?@[\\]^`{|}~\n\t\r"
_SPACES = str.maketrans(dict.fromkeys(_PUNCTUATION, " "))
_BOUNDARY = frozenset(" " + _PUNCTUATION)
_START = re.Match.start
_BEFORE = (-1).__add__


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
    """BM25 of each text for the question, mapped to [0, 1): s / (s + RELEVANCE_HALF)."""
    terms = query_terms(question)
    if not terms or not texts:
        return [0.0] * len(texts)
    lowered = [t.lower() for t in texts]  # one at a time: lower() may change a length
    corpus = "\n" + "\n".join(lowered)  # "\n" is a boundary: each text starts a word
    starts = list(accumulate((len(t) + 1 for t in lowered), initial=1))  # and one past the end
    columns = [_counts(corpus, starts, term) for term in terms]
    n = len(texts)
    idfs = []
    for column in columns:
        df = n - column.count(0)
        idfs.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    lengths = [len(text) + 1 for text in texts]  # characters: only the ratio to the mean counts
    average = sum(lengths) / len(lengths)
    out = [0.0] * n
    k1_plus_1 = BM25_K1 + 1
    for i, row in enumerate(zip(*columns, strict=True)):
        if any(row):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / average)
            pairs = zip(idfs, row, strict=True)
            s = sum([idf * f * k1_plus_1 / (f + norm) for idf, f in pairs if f])
            out[i] = s / (s + RELEVANCE_HALF)
    return out


def _counts(corpus: str, starts: list[int], term: str) -> list[int]:
    """How many times `term` occurs as a word in each text of `corpus` (texts begin at
    `starts`).

    All in C (finditer, map, compress, bisect): a thousand turns hold thousands
    of a common term, and a Python step per occurrence cost more than the search itself.
    """
    found = list(map(_START, re.finditer(rf"{re.escape(term)}(?:e?s)?(?![\w-])", corpus)))
    if not found:
        return [0] * (len(starts) - 1)
    # A word when the character before it is a boundary (the corpus starts with one).
    at = list(compress(found, map(_BOUNDARY.__contains__, map(corpus.__getitem__,
                                                              map(_BEFORE, found)))))
    before = list(map(partial(bisect_left, at), starts))  # words found before each text
    return list(map(sub, before[1:], before))
