"""Retrieval over a collection: vector, keyword and hybrid (reciprocal rank fusion) search.

Pure ranking logic: the store runs the two queries (LanceDB vector search and BM25 full-text
search), this module decides which to run, fuses them, applies the similarity threshold and
the filters, and turns rows into `Hit`s. Embedding the query is the caller's job, so the same
code serves `search`, batch search, `chat` retrieval and `eval`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import UsageError
from localgpt_cli.rag.types import Hit

if TYPE_CHECKING:
    from localgpt_cli.rag.store import Collection, StoredRow

MODES = ("hybrid", "vector", "keyword")
DEFAULT_K = 5
DEFAULT_THRESHOLD = 0.3
# RRF's constant from Cormack et al. (2009): large enough that rank 1 does not dwarf rank 5,
# and the value their experiments found robust across collections.
RRF_K = 60


def candidate_pool(k: int) -> int:
    """How many rows each side fetches before fusion: fusion needs depth beyond k (a chunk
    ranked 30th by one side and 2nd by the other must be seen by both)."""
    return max(k * 4, 20)


@dataclass
class Dropped:
    """A hit that would have been in the top k but was cut (e.g. below the threshold)."""

    document_id: str
    path: str
    chunk: int
    score: float
    reason: str


@dataclass
class SearchResult:
    hits: list[Hit]
    mode_used: str
    warnings: list[str] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


@dataclass
class _Candidate:
    row: StoredRow
    vector_rank: int | None = None
    keyword_rank: int | None = None
    similarity: float | None = None
    bm25: float | None = None
    fused: float = 0.0


def glob_to_like(glob: str) -> tuple[str, bool]:
    """An fnmatch glob as a SQL LIKE pattern (backslash escapes), and whether it is exact.

    `*` -> `%` and `?` -> `_` are exact; a character class `[...]` becomes `_` (one
    character), which matches a superset, so the caller must post-filter with fnmatch.
    """
    out: list[str] = []
    exact = True
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        elif ch == "[":
            end = _class_end(glob, i)
            if end is None:
                out.append("[")  # fnmatch treats an unclosed `[` as a literal
            else:
                out.append("_")
                exact = False
                i = end
        elif ch in "%_\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out), exact


def _class_end(glob: str, start: int) -> int | None:
    """Index of the `]` closing the class that opens at `start`, as fnmatch parses it."""
    j = start + 1
    if j < len(glob) and glob[j] == "!":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    return end if end != -1 else None


def build_filter(
    *, type: str | None = None, path_glob: str | None = None, document_id: str | None = None
) -> tuple[str | None, Callable[[StoredRow], bool] | None]:
    """The SQL prefilter for the store, and a post-filter when the glob is not exact in SQL."""
    from localgpt_cli.rag.store import sql_string

    clauses = []
    post: Callable[[StoredRow], bool] | None = None
    if type:
        clauses.append(f"type = {sql_string(type)}")
    if document_id:
        clauses.append(f"document_id = {sql_string(document_id)}")
    if path_glob:
        like, exact = glob_to_like(path_glob)
        clauses.append(f"path LIKE {sql_string(like)}")
        if not exact:
            glob = path_glob

            def post(row: StoredRow) -> bool:
                return fnmatchcase(row.chunk.path, glob)

    return (" AND ".join(clauses) or None), post


def search(
    collection: Collection,
    query_text: str,
    query_vector: Sequence[float] | None,
    *,
    k: int = DEFAULT_K,
    mode: str = "hybrid",
    threshold: float | None = DEFAULT_THRESHOLD,
    type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    rrf_k: int = RRF_K,
    vector_weight: float = 1.0,
    keyword_weight: float = 1.0,
) -> SearchResult:
    """Top-k chunks for one query.

    `threshold` is a cosine similarity applied to the vector side only: a chunk found only
    by its vector and scoring below it is dropped (listed in `dropped`), while a chunk the
    keyword side also found is kept: a word match is evidence the threshold cannot see.
    Hybrid and vector mode fall back to keyword search, with a warning, when there is no
    query vector (Ollama down) or the collection has no vectors yet.
    """
    return _Searcher(collection).run(
        query_text,
        query_vector,
        k=k,
        mode=mode,
        threshold=threshold,
        filters={"type": type, "path_glob": path_glob, "document_id": document_id},
        rrf_k=rrf_k,
        weights=(vector_weight, keyword_weight),
    )


def search_many(
    collection: Collection,
    queries: Sequence[tuple[str, Sequence[float] | None]],
    *,
    k: int = DEFAULT_K,
    mode: str = "hybrid",
    threshold: float | None = DEFAULT_THRESHOLD,
    type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    rrf_k: int = RRF_K,
    vector_weight: float = 1.0,
    keyword_weight: float = 1.0,
) -> list[SearchResult]:
    """`search` for many queries over one open table: the collection's state (vector
    column, row counts, indexes) is read once, not per query."""
    searcher = _Searcher(collection)
    filters = {"type": type, "path_glob": path_glob, "document_id": document_id}
    return [
        searcher.run(
            text,
            vector,
            k=k,
            mode=mode,
            threshold=threshold,
            filters=filters,
            rrf_k=rrf_k,
            weights=(vector_weight, keyword_weight),
        )
        for text, vector in queries
    ]


class _Searcher:
    """Runs queries against one collection, caching what does not change between them."""

    def __init__(self, collection: Collection):
        self.collection = collection
        self._has_vectors: bool | None = None

    @property
    def has_vectors(self) -> bool:
        if self._has_vectors is None:
            self._has_vectors = self.collection.count_with_vectors() > 0
        return self._has_vectors

    def run(
        self,
        query_text: str,
        query_vector: Sequence[float] | None,
        *,
        k: int,
        mode: str,
        threshold: float | None,
        filters: dict[str, Any],
        rrf_k: int,
        weights: tuple[float, float],
    ) -> SearchResult:
        if mode not in MODES:
            raise UsageError(
                f"Unknown search mode {mode!r}.", hint="Use hybrid, vector or keyword."
            )
        if k < 1:
            raise UsageError(f"-k must be at least 1 (got {k}).")
        if rrf_k < 1:
            raise UsageError(f"The RRF constant must be at least 1 (got {rrf_k}).")
        warnings: list[str] = []
        mode_used = mode
        if mode != "keyword":
            if query_vector is None:
                warnings.append(
                    "No query embedding (Ollama unreachable?): falling back to keyword search."
                )
                mode_used = "keyword"
            elif not self.has_vectors:
                warnings.append(
                    f"Collection {self.collection.name!r} has no embeddings yet: "
                    "falling back to keyword search."
                )
                mode_used = "keyword"
        if mode_used != "vector" and not _has_words(query_text):
            if mode_used == "keyword":
                raise UsageError("The query has no words to search for.")
            mode_used = "vector"  # hybrid with nothing to match by keyword
        where, post = build_filter(**filters)
        pool = candidate_pool(k)
        candidates: dict[str, _Candidate] = {}
        if mode_used in ("vector", "hybrid"):
            assert query_vector is not None
            rows = self._fetch(self.collection.vector_search, query_vector, pool, where, post)
            for rank, row in enumerate(rows, 1):
                cand = candidates.setdefault(row.chunk_id, _Candidate(row))
                cand.vector_rank, cand.similarity = rank, row.score
        if mode_used in ("keyword", "hybrid"):
            rows = self._fetch(self.collection.keyword_search, query_text, pool, where, post)
            for rank, row in enumerate(rows, 1):
                cand = candidates.setdefault(row.chunk_id, _Candidate(row))
                cand.keyword_rank, cand.bm25 = rank, row.score
        ranked = _rank(list(candidates.values()), mode_used, rrf_k, weights)
        hits, dropped = _cut(ranked, k, threshold, mode_used)
        return SearchResult(hits, mode_used, warnings, dropped)

    @staticmethod
    def _fetch(
        method: Callable[..., list[StoredRow]],
        query: Any,
        pool: int,
        where: str | None,
        post: Callable[[StoredRow], bool] | None,
    ) -> list[StoredRow]:
        """Candidates of one side; with a post-filter (an inexact glob), fetch deeper until
        `pool` rows pass or the side has no more."""
        limit = pool
        while True:
            rows = method(query, limit, where)
            if post is None:
                return rows
            kept = [r for r in rows if post(r)]
            if len(kept) >= pool or len(rows) < limit:
                return kept[:pool]
            limit *= 4


def _has_words(text: str) -> bool:
    return re.search(r"\w", text or "") is not None


def _rank(
    candidates: list[_Candidate], mode: str, rrf_k: int, weights: tuple[float, float]
) -> list[_Candidate]:
    """Order candidates: by similarity, by BM25, or by reciprocal-rank fusion.

    RRF uses ranks, not scores, because cosine similarities and BM25 scores live on
    unrelated scales; each side contributes weight / (rrf_k + rank). Ties go to the better
    single-side rank, then to the chunk id, so the order is stable.
    """
    vector_weight, keyword_weight = weights
    for c in candidates:
        if mode == "vector":
            c.fused = c.similarity or 0.0
        elif mode == "keyword":
            c.fused = c.bm25 or 0.0
        else:
            c.fused = 0.0
            if c.vector_rank is not None:
                c.fused += vector_weight / (rrf_k + c.vector_rank)
            if c.keyword_rank is not None:
                c.fused += keyword_weight / (rrf_k + c.keyword_rank)

    def best_rank(c: _Candidate) -> int:
        return min(r for r in (c.vector_rank, c.keyword_rank, 10**9) if r is not None)

    return sorted(candidates, key=lambda c: (-c.fused, best_rank(c), c.row.chunk_id))


def _cut(
    ranked: list[_Candidate], k: int, threshold: float | None, mode: str
) -> tuple[list[Hit], list[Dropped]]:
    """The first k candidates that pass the threshold; those that failed it while still
    inside the top k are reported as dropped (they are what the user would have seen)."""
    hits: list[Hit] = []
    dropped: list[Dropped] = []
    for cand in ranked:
        if len(hits) >= k:
            break
        vector_only = cand.keyword_rank is None
        if (
            threshold is not None
            and mode != "keyword"
            and vector_only
            and cand.similarity is not None
            and cand.similarity < threshold
        ):
            if len(hits) + len(dropped) < k:
                chunk = cand.row.chunk
                dropped.append(
                    Dropped(
                        chunk.document_id,
                        chunk.path,
                        chunk.ordinal,
                        cand.similarity,
                        "below_threshold",
                    )
                )
            continue
        hits.append(_hit(cand, len(hits) + 1, mode))
    return hits, dropped


def _hit(cand: _Candidate, rank: int, mode: str) -> Hit:
    chunk = cand.row.chunk
    extra: dict[str, Any] = {"chunk_id": cand.row.chunk_id}
    if mode == "hybrid":
        extra.update(
            vector_rank=cand.vector_rank,
            keyword_rank=cand.keyword_rank,
            similarity=cand.similarity,
            bm25=cand.bm25,
        )
    return Hit(
        rank=rank,
        score=cand.fused,
        document_id=chunk.document_id,
        path=chunk.path,
        chunk=chunk.ordinal,
        text=chunk.text,
        type=chunk.type,
        page=chunk.page,
        heading=chunk.heading,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        extra=extra,
    )
