"""The local reranker: re-scores a query's fused candidates with no extra model.

Reciprocal rank fusion (fusion.py) throws the two sides' scores away and keeps their ranks;
that is robust but blind to how far apart candidates are. The reranker takes the first
`RERANK_DEPTH` fused candidates and orders them again by three parts, each measured on two
labelled collections of different kinds (Cranfield's aeronautics abstracts and click's
API reference, tests/bench/rerank.py; figures in the README's Performance section):

- `combine`: the two sides' scores, each min-max normalised over the side's first
  `STATS_POOL` rows, added with equal weights (CombSUM). A candidate one side did not
  return gets that side's floor: the vector side's lowest similarity (it ranked below
  it), 0 BM25.
- `documents`: a document is as good as its best passage on each side, so every passage
  is scored by its document's best similarity and best BM25, plus `PASSAGE_WEIGHT` of
  its own score (which orders one document's passages and shows in their scores; at 0.02
  it changes nDCG@10 by +0.0004 on Cranfield and nothing on click's docs, while 0.1
  cost 0.002 on Cranfield). A short document cut into two passages keeps its
  title's words in one and its key sentence in the other; each side finds one of them.
- `title`: the share of the query's words (light stemming, stop words out) that occur in
  the document's title, weighted `TITLE_WEIGHT`: a field match a passage's body dilutes.

The candidates after `RERANK_DEPTH` keep their fused order below the re-scored ones.
Pseudo-relevance feedback was tried (BM25 expansion from the top three documents, with
and without requiring the two sides to agree) and left out: it did not gain on either
collection.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from localgpt_cli.rag.fusion import Candidate

RERANKERS = ("local", "none")
PARTS = ("combine", "documents", "title")
RERANK_DEPTH = 40  # candidates re-scored (the "30-50" a reranker needs, per the issue)
STATS_POOL = 100  # rows per side that set the normalisation and the documents' best
VECTOR_SHARE = 0.5  # equal weights: no side is favoured (fusion.py keeps them equal too)
TITLE_WEIGHT = 0.3  # a full title match counts like 60% of one side's best score
# The passage's own score, added lightly: it orders one document's passages and makes the
# visible score tell them apart (with `documents` alone, every passage of a one-document
# collection showed 1.0).
PASSAGE_WEIGHT = 0.02
TERMS_CACHE = 8192  # texts whose words are kept (~3 KB each): a batch's passages

_STOP_WORDS = (
    "a an and are as at be by can do does for from has have how i in is it its of on or that "
    "the this to was what when where which who why will with my me you your into than then "
    "there these those not no if any all some should would could may"
)
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ational", "ations", "ation", "ings", "ing", "ies", "ied", "edly", "ed",
             "es", "s", "ly")  # fmt: skip


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: plural, -ing, -ed, -ation. Enough to match "heated" with
    "heating" in a title; a full Porter stemmer changed nothing measurable here."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


@functools.lru_cache(maxsize=TERMS_CACHE)
def terms(text: str) -> frozenset[str]:
    """The stemmed content words of `text` (lower case; `_` and `.` split words).

    Cached: at k=100 the gate reads the words of every kept passage of every query, and
    the same passages come back for many queries of a batch (on Cranfield 2,687 distinct
    passages make up the 20,725 hits of its 225 questions); reading them was a third of
    `search --queries`' time. `forget_terms` empties the cache after a search."""
    return frozenset(map(stem, set(_WORD.findall(text.lower())) - _STOP))


def forget_terms() -> None:
    """Empty the cache of `terms`: a long-running process does not keep a batch's texts."""
    terms.cache_clear()


@dataclass
class _Side:
    """One side's normalisation: its floor (lowest score in the pool) and its best."""

    floor: float
    top: float

    @classmethod
    def of(cls, scores: Iterable[float], floor: float | None = None) -> _Side:
        values = list(scores)
        if not values:
            return cls(0.0, 0.0)
        low = min(values) if floor is None else floor
        return cls(low, max(values))

    def norm(self, score: float | None) -> float:
        span = self.top - self.floor
        if span <= 0:
            return 0.0
        value = self.floor if score is None else score
        return (value - self.floor) / span


def rerank(
    candidates: list[Candidate],
    query: str,
    parts: Sequence[str] = PARTS,
    depth: int = RERANK_DEPTH,
) -> list[Candidate]:
    """`candidates` (in fused order) with the first `depth` re-scored and re-ordered; each
    re-scored candidate's `rerank` is set. No parts: the fused order, unchanged."""
    if not parts or not candidates:
        return candidates
    vector = _Side.of(c.similarity for c in candidates if _pooled(c.vector_rank)
                      and c.similarity is not None)  # fmt: skip
    keyword = _Side.of((c.bm25 for c in candidates if _pooled(c.keyword_rank)
                        and c.bm25 is not None), floor=0.0)  # fmt: skip

    def score(similarity: float | None, bm25: float | None) -> float:
        return VECTOR_SHARE * vector.norm(similarity) + (1 - VECTOR_SHARE) * keyword.norm(bm25)

    head = candidates[:depth]
    own = {c.row.chunk_id: score(c.similarity, c.bm25) for c in head}
    if "combine" not in parts:  # the fused score, normalised, for the parts alone
        best = max(c.fused for c in head) or 1.0
        own = {c.row.chunk_id: c.fused / best for c in head}
    document = _document_scores(candidates, head, score) if "documents" in parts else {}
    words = terms(query) if "title" in parts else frozenset()
    for c in head:
        base = document.get(c.row.chunk.document_id, own[c.row.chunk_id])
        c.rerank = base + TITLE_WEIGHT * _title_match(c, words)
        if document:
            c.rerank += PASSAGE_WEIGHT * own[c.row.chunk_id]
    head.sort(key=lambda c: (-(c.rerank or 0.0), -own[c.row.chunk_id], c.row.chunk_id))
    return head + candidates[depth:]


def _pooled(rank: int | None) -> bool:
    return rank is not None and rank <= STATS_POOL


def _document_scores(
    candidates: list[Candidate],
    head: list[Candidate],
    score: Callable[[float | None, float | None], float],
) -> dict[str, float]:
    """Each head document's score from its best similarity and best BM25 in the pool."""
    wanted = {c.row.chunk.document_id for c in head}
    best: dict[str, list[float | None]] = {}
    for c in candidates:
        doc = c.row.chunk.document_id
        if doc not in wanted:
            continue
        sides = best.setdefault(doc, [None, None])
        sides_of = ((c.similarity, c.vector_rank), (c.bm25, c.keyword_rank))
        for i, (value, rank) in enumerate(sides_of):
            if value is not None and _pooled(rank):
                known = sides[i]
                sides[i] = value if known is None else max(known, value)
    return {doc: score(v, k) for doc, (v, k) in best.items()}


def _title_match(cand: Candidate, words: frozenset[str]) -> float:
    """The share of the query's words found in the passage's document title."""
    if not words:
        return 0.0
    chunk = cand.row.chunk
    title = chunk.title or chunk.heading or ""
    return len(words & terms(title)) / len(words)
