"""Retrieval over a collection: vector, keyword and hybrid (reciprocal rank fusion) search.

Pure ranking logic: the store runs the two queries (LanceDB vector search and BM25 full-text
search), this module decides which to run, fuses them (`fusion.py`), applies the similarity
threshold and the filters, and turns rows into `Hit`s. Embedding the query is the caller's
job, so the same code serves `search`, batch search, `chat` retrieval and `eval`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import UsageError
from localgpt_cli.rag.fusion import RRF_K, Candidate, Dropped, cut, fuse
from localgpt_cli.rag.types import Hit, Judge

if TYPE_CHECKING:
    from localgpt_cli.rag.store import (
        ChunkCache,
        Collection,
        KeywordQuery,
        StoredRow,
        VectorQuery,
    )

MODES = ("hybrid", "vector", "keyword")
DEFAULT_K = 5
DEFAULT_THRESHOLD = 0.3
# Cosine similarities live on a different scale for each embedding model, so the default
# --threshold does too (model name without tag -> threshold). Models not listed get
# DEFAULT_THRESHOLD, which was chosen for nomic-embed-text. all-minilm measured on
# Cranfield in 500/80 chunks (tests/bench/retrieval.py --tune): the best passage of a
# relevant document scores >= 0.48 for 95% of the questions and the top passage >= 0.43
# for all of them, while questions the collection cannot answer top out at 0.20 (median)
# and 0.27 (max); 0.3 drops the latter and costs nDCG@10 nothing (0.3609 at 0 and at
# 0.3), 0.4 starts cutting relevant passages (R@100 0.768 -> 0.726).
MODEL_THRESHOLDS: dict[str, float] = {
    "nomic-embed-text": 0.3,
    "all-minilm": 0.3,
}


def default_threshold(model: str | None) -> float:
    """The default --threshold for queries embedded with `model`."""
    from localgpt_cli.rag.embedding import base_name

    if not model:
        return DEFAULT_THRESHOLD
    return MODEL_THRESHOLDS.get(base_name(model), DEFAULT_THRESHOLD)


# Chunks the searcher keeps between batches (store/search.py run_queries), ~1-2 KB each.
CHUNK_CACHE = 20_000


def candidate_pool(k: int) -> int:
    """How many rows each side fetches before fusion: fusion needs depth beyond k (a chunk
    ranked 30th by one side and 2nd by the other must be seen by both).

    Four times k for the small k people ask for; past k=33, k+100: a chunk 100 places
    below the cut on one side needs a top rank on the other to get in, and the other side
    sees it then. Measured on Cranfield at k=100 (tests/bench/retrieval.py): the same
    figures as 4k, and batch hybrid search goes from ~45 to ~65 queries/s, turning rows
    into Python objects being most of its cost.
    """
    return max(min(k * 4, k + 100), 20)


@dataclass
class SearchResult:
    hits: list[Hit]
    mode_used: str
    warnings: list[str] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


def build_filter(
    *, type: str | None = None, path_glob: str | None = None, document_id: str | None = None
) -> tuple[str | None, Callable[[StoredRow], bool] | None]:
    """The store's prefilter, and a post-filter when the glob is not exact as a prefilter."""
    from localgpt_cli.rag.store import chunk_filter

    where, exact = chunk_filter(type=type, path_glob=path_glob, document_id=document_id)
    post: Callable[[StoredRow], bool] | None = None
    if path_glob and not exact:
        glob = path_glob

        def post(row: StoredRow) -> bool:
            return fnmatchcase(row.chunk.path, glob)

    return where, post


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
    rerank: str = "none",
    theta: float | None = None,
    gate_scale: tuple[float, float] | None = None,
) -> SearchResult:
    """Top-k chunks for one query.

    `threshold` is a cosine similarity applied to the vector side only: a chunk found only
    by its vector and scoring below it is dropped (listed in `dropped`), while a chunk the
    keyword side also found is kept: a word match is evidence the threshold cannot see.
    Hybrid and vector mode fall back to keyword search, with a warning, when there is no
    query vector (Ollama down) or the collection has no vectors yet.
    """
    return search_many(
        collection, [(query_text, query_vector)], k=k, mode=mode, threshold=threshold,
        type=type, path_glob=path_glob, document_id=document_id, rrf_k=rrf_k,
        vector_weight=vector_weight, keyword_weight=keyword_weight, rerank=rerank,
        theta=theta, gate_scale=gate_scale,
    )[0]  # fmt: skip


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
    batch_size: int = 64,
    rerank: str = "none",
    theta: float | None = None,
    parts: Sequence[str] | None = None,
    gate_scale: tuple[float, float] | None = None,
    judge: Judge | None = None,
    judge_depth: int | None = None,
) -> list[SearchResult]:
    """`search` for many queries over one open table, results in query order.

    The collection's state (vector column, indexes) is read once, and the store runs the
    queries of a batch concurrently (LanceDB works outside the GIL), which is what makes
    batch search several times faster than one query at a time.

    `rerank="local"` re-scores the fused candidates (rerank.py; `parts` picks its parts,
    for the benchmark's ablations), and `theta` gates the top k (gate.py; None: no gate)
    on the embedding model's cosine scale `gate_scale` (gate.scale_for), or by the
    relevance a provider's reranker (`judge`, judge.py) gives the first candidates
    (`judge_depth` of them, else gate.judge_depth(k)).
    """
    from localgpt_cli.rag.rerank import PARTS

    chosen = PARTS if parts is None else tuple(parts)
    options = _Options(
        k,
        mode,
        threshold,
        rrf_k,
        (vector_weight, keyword_weight),
        {"type": type, "path_glob": path_glob, "document_id": document_id},
        chosen if rerank == "local" else (),
        theta,
        gate_scale,
        judge,
        judge_depth,
    )
    from localgpt_cli.rag.rerank import forget_terms

    searcher = _Searcher(collection, options)
    try:
        return searcher.run_all(queries, max(1, batch_size))
    finally:
        forget_terms()


@dataclass(frozen=True)
class _Options:
    k: int
    mode: str
    threshold: float | None
    rrf_k: int
    weights: tuple[float, float]
    filters: dict[str, Any]
    parts: tuple[str, ...] = ()  # the reranker's parts; () = no reranking
    theta: float | None = None  # the gate's strictness; None = no gate
    scale: tuple[float, float] | None = None  # the gate's (floor, near-certain) cosines
    judge: Judge | None = None  # a provider's reranker (judge.py); None = none
    judge_depth: int | None = None  # candidates it re-scores; None = gate.judge_depth(k)


@dataclass
class _Plan:
    """What one query will run: the mode after fallbacks, and its side queries."""

    text: str
    vector: Sequence[float] | None
    mode_used: str
    warnings: list[str]
    sides: list[str]  # "vector" and/or "keyword", in that order


class _Searcher:
    """Runs queries against one collection, caching what does not change between them."""

    def __init__(self, collection: Collection, options: _Options):
        if options.mode not in MODES:
            raise UsageError(
                f"Unknown search mode {options.mode!r}.", hint="Use hybrid, vector or keyword."
            )
        if options.k < 1:
            raise UsageError(f"-k must be at least 1 (got {options.k}).")
        if options.rrf_k < 1:
            raise UsageError(f"The RRF constant must be at least 1 (got {options.rrf_k}).")
        check_theta(options.theta)
        self.collection = collection
        self.options = options
        self.where, self.post = build_filter(**options.filters)
        self.pool = candidate_pool(options.k)
        if options.parts or options.theta is not None or options.judge is not None:
            from localgpt_cli.rag.rerank import STATS_POOL

            self.pool = max(self.pool, STATS_POOL)
        self._has_vectors: bool | None = None
        self._fts_note: str | None = None
        # The store's chunk cache (row id -> chunk id and chunk), for runs of many
        # queries: one query would pay a second round trip to the store (the take) for
        # nothing.
        self.chunks: ChunkCache | None = None

    @property
    def has_vectors(self) -> bool:
        if self._has_vectors is None:
            self._has_vectors = self.collection.has_vectors()
        return self._has_vectors

    def plan(self, text: str, vector: Sequence[float] | None) -> _Plan:
        warnings: list[str] = []
        mode = self.options.mode
        if mode != "keyword":
            # The collection first: a query is not embedded for a collection without
            # vectors, and blaming Ollama then would send the user after a healthy server.
            # Why an embedding failed is the caller's to say (it saw the error).
            if not self.has_vectors:
                warnings.append(
                    f"Collection {self.collection.name!r} has no embeddings yet (the next "
                    "ingest with Ollama up makes them): falling back to keyword search."
                )
                mode = "keyword"
            elif vector is None:
                warnings.append("No query embedding: falling back to keyword search.")
                mode = "keyword"
        if mode != "vector" and not has_words(text):
            if mode == "keyword":
                raise UsageError("The query has no words to search for.")
            mode = "vector"  # hybrid with nothing to match by keyword
        sides = {"vector": ["vector"], "keyword": ["keyword"]}.get(mode, ["vector", "keyword"])
        if "keyword" in sides and self.fts_note:
            warnings.append(self.fts_note)
        return _Plan(text, vector, mode, warnings, sides)

    @property
    def fts_note(self) -> str:
        """A warning when the full-text index is missing from a non-empty collection (a
        killed ingest): keyword search still answers, but without the index's stemming
        and stop words, so it silently finds less. Search must not write, so it says how
        to rebuild the index rather than rebuilding it."""
        if self._fts_note is None:
            coll = self.collection
            missing = not coll.has_fts_index() and coll.count() > 0
            self._fts_note = (
                f"Collection {coll.name!r} has no full-text index (an ingest was "
                "interrupted): keyword matches miss other forms of a word. Any ingest into "
                f"it rebuilds the index: localgpt ingest -C {coll.name} PATH..."
                if missing
                else ""
            )
        return self._fts_note

    def _query(self, plan: _Plan, side: str, limit: int) -> VectorQuery | KeywordQuery:
        from localgpt_cli.rag.store import KeywordQuery, VectorQuery

        if side == "vector":
            assert plan.vector is not None
            return VectorQuery(plan.vector, limit, self.where)
        return KeywordQuery(plan.text, limit, self.where)

    def run_all(
        self, queries: Sequence[tuple[str, Sequence[float] | None]], batch_size: int
    ) -> list[SearchResult]:
        """Every query's result, in order, `batch_size` queries to a store round.

        The store searches the next batch on a second thread while this one fuses,
        reranks and gates the last: LanceDB searches outside the GIL, so the two use both
        cores. Every query is planned first, so a query that cannot run fails before any
        is searched. An inexact path glob may search again from `_post_filter`, so it
        runs one batch at a time."""
        plans = [self.plan(text, vector) for text, vector in queries]
        if len(plans) > 1:
            self.chunks = {}
        batches = [plans[i : i + batch_size] for i in range(0, len(plans), batch_size)]
        results: list[SearchResult] = []
        if self.post is not None or len(batches) < 2:
            for batch in batches:
                results += self._finish(batch, self._fetch(batch))
            return results
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="search") as pool:
            ahead = pool.submit(self._fetch, batches[0])
            for i, batch in enumerate(batches):
                rows = ahead.result()
                if i + 1 < len(batches):
                    ahead = pool.submit(self._fetch, batches[i + 1])
                results += self._finish(batch, rows)
        return results

    def _fetch(self, plans: Sequence[_Plan]) -> list[list[StoredRow]]:
        """The rows of every side of every plan, one list per side in plan order."""
        specs = [self._query(p, side, self.pool) for p in plans for side in p.sides]
        if self.chunks is not None and len(self.chunks) > CHUNK_CACHE:
            self.chunks.clear()
        return self.collection.run_queries(specs, chunks=self.chunks)

    def _finish(
        self, plans: Sequence[_Plan], fetched: list[list[StoredRow]]
    ) -> list[SearchResult]:
        rows = iter(fetched)
        results = []
        for p in plans:
            side_rows = {side: self._post_filter(p, side, next(rows)) for side in p.sides}
            results.append(self._result(p, side_rows))
        return results

    def _post_filter(self, plan: _Plan, side: str, rows: list[StoredRow]) -> list[StoredRow]:
        """Apply an inexact glob exactly; when it leaves fewer than `pool` rows and the
        side had more, fetch deeper until enough pass or the side runs out."""
        if self.post is None:
            return rows
        limit = self.pool
        while True:
            kept = [r for r in rows if self.post(r)]
            if len(kept) >= self.pool or len(rows) < limit:
                return kept[: self.pool]
            limit *= 4
            query = self._query(plan, side, limit)
            rows = self.collection.run_queries([query], chunks=self.chunks)[0]

    def _result(self, plan: _Plan, side_rows: dict[str, list[StoredRow]]) -> SearchResult:
        candidates: dict[str, Candidate] = {}
        found = candidates.get
        for rank, row in enumerate(side_rows.get("vector", []), 1):
            cand = found(row.chunk_id) or candidates.setdefault(row.chunk_id, Candidate(row))
            cand.vector_rank, cand.similarity = rank, row.score
        for rank, row in enumerate(side_rows.get("keyword", []), 1):
            cand = found(row.chunk_id) or candidates.setdefault(row.chunk_id, Candidate(row))
            cand.keyword_rank, cand.bm25 = rank, row.score
        opts = self.options
        ranked = fuse(list(candidates.values()), plan.mode_used, opts.rrf_k, opts.weights)
        if not opts.parts and opts.theta is None and opts.judge is None:
            hits, dropped = cut(ranked, opts.k, opts.threshold, plan.mode_used)
            return SearchResult(hits, plan.mode_used, plan.warnings, dropped)
        from localgpt_cli.rag.gate import fast_path

        hits, dropped = fast_path(ranked, plan.text, opts.k, opts.threshold, plan.mode_used,
                                  opts.parts, opts.theta, opts.scale, opts.judge,
                                  plan.warnings, opts.judge_depth)  # fmt: skip
        return SearchResult(hits, plan.mode_used, plan.warnings, dropped)


def check_theta(theta: float | None) -> None:
    """θ is a strictness from 0 (keep what the reranker kept) to 1 (near-certain only)."""
    if theta is not None and not 0.0 <= theta <= 1.0:
        raise UsageError(f"--theta must be between 0 and 1 (got {theta:g}).",
                         hint="0 keeps every passage the reranker kept, 1 only near-certain "
                              "support; the default is rag.theta.")  # fmt: skip


def has_words(text: str) -> bool:
    """Whether keyword search has anything to match (a query of punctuation has not)."""
    return re.search(r"\w", text or "") is not None
