"""Fusing the vector and keyword rankings of one query into its hits.

Reciprocal rank fusion (RRF) for hybrid search, the similarity threshold, and turning the
fused candidates into `Hit`s; the searcher in `retrieve.py` collects the candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.types import Hit

if TYPE_CHECKING:
    from localgpt_cli.rag.store import StoredRow

# RRF's constant from Cormack et al. (2009): large enough that rank 1 does not dwarf rank 5,
# and the value their experiments found robust across collections.
RRF_K = 60
NO_RANK = 10**9  # the rank of a side that did not find the candidate, when ordering ties


@dataclass
class Dropped:
    """A hit that would have been in the top k but was cut: below the threshold, pushed
    out by the reranker, or judged off the question by the gate."""

    document_id: str
    path: str
    chunk: int
    score: float
    reason: str  # below_threshold | rerank_cutoff | gate
    stage: str = "threshold"  # threshold | rerank | gate
    scores: dict[str, float] = field(default_factory=dict)


@dataclass
class Candidate:
    """A chunk one or both sides found: its rank and raw score on each, and the fused score."""

    row: StoredRow
    vector_rank: int | None = None
    keyword_rank: int | None = None
    similarity: float | None = None
    bm25: float | None = None
    fused: float = 0.0
    rerank: float | None = None  # set by the reranker (rerank.py)
    judged: float | None = None  # set by a provider's reranker (judge.py), 0..1
    gate: float | None = None  # set by the gate (gate.py)

    def scores(self) -> dict[str, float]:
        """The score of each stage this candidate went through (absent sides left out).
        Asked of every hit and every dropped passage: at k=100 a batch asks it ~40,000
        times, so the stages are written out rather than looped over."""
        out: dict[str, float] = {}
        if self.similarity is not None:
            out["vector"] = round(self.similarity, 6)
        if self.bm25 is not None:
            out["bm25"] = round(self.bm25, 6)
        if self.fused is not None:
            out["fused"] = round(self.fused, 6)
        if self.rerank is not None:
            out["rerank"] = round(self.rerank, 6)
        if self.judged is not None:
            out["provider_rerank"] = round(self.judged, 6)
        if self.gate is not None:
            out["gate"] = round(self.gate, 6)
        return out

    @property
    def strength(self) -> float:
        """The score of the last stage that ordered this candidate."""
        if self.judged is not None:
            return self.judged
        return self.fused if self.rerank is None else self.rerank

    def dropped(self, reason: str, stage: str, score: float | None = None) -> Dropped:
        chunk = self.row.chunk
        value = self.fused if score is None else score
        return Dropped(chunk.document_id, chunk.path, chunk.ordinal, value, reason, stage,
                       self.scores())  # fmt: skip


def fuse(
    candidates: list[Candidate], mode: str, rrf_k: int, weights: tuple[float, float]
) -> list[Candidate]:
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

    def order(c: Candidate) -> tuple[float, int, str]:
        vector, keyword = c.vector_rank, c.keyword_rank
        best = min(NO_RANK if vector is None else vector, NO_RANK if keyword is None else keyword)
        return -c.fused, best, c.row.chunk_id

    return sorted(candidates, key=order)


def cut(
    ranked: list[Candidate], k: int, threshold: float | None, mode: str
) -> tuple[list[Hit], list[Dropped]]:
    """The first k candidates that pass the threshold, as hits; those that failed it while
    still inside the top k are reported as dropped (they are what the user would have seen)."""
    kept, dropped = cut_candidates(ranked, k, threshold, mode)
    return [hit(c, rank, mode) for rank, c in enumerate(kept, 1)], dropped


def cut_candidates(
    ranked: list[Candidate], k: int, threshold: float | None, mode: str
) -> tuple[list[Candidate], list[Dropped]]:
    """`cut` before the candidates become hits (the gate judges them first)."""
    kept: list[Candidate] = []
    dropped: list[Dropped] = []
    for cand in ranked:
        if len(kept) >= k:
            break
        vector_only = cand.keyword_rank is None
        if (
            threshold is not None
            and mode != "keyword"
            and vector_only
            and cand.similarity is not None
            and cand.similarity < threshold
        ):
            if len(kept) + len(dropped) < k:
                dropped.append(cand.dropped("below_threshold", "threshold", cand.similarity))
            continue
        kept.append(cand)
    return kept, dropped


def hit(cand: Candidate, rank: int, mode: str) -> Hit:
    chunk = cand.row.chunk
    extra: dict[str, Any] = {"chunk_id": cand.row.chunk_id, "scores": cand.scores()}
    if mode == "hybrid":
        extra.update(
            vector_rank=cand.vector_rank,
            keyword_rank=cand.keyword_rank,
            similarity=cand.similarity,
            bm25=cand.bm25,
        )
    return Hit(
        rank=rank,
        score=cand.strength,
        document_id=chunk.document_id,
        path=chunk.path,
        chunk=chunk.ordinal,
        text=chunk.text,
        type=chunk.type,
        page=chunk.page,
        heading=chunk.heading,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        ocr_confidence=chunk.ocr_confidence,
        extra=extra,
    )
