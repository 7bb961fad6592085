"""The gate: drops passages of the top k that do not address the question, by strictness θ.

PLACEHOLDER
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from localgpt_cli.rag.fusion import Candidate, Dropped, hit, cut_candidates
from localgpt_cli.rag.types import Hit


def fast_path(
    ranked: list[Candidate],
    query: str,
    k: int,
    threshold: float | None,
    mode: str,
    parts: Sequence[str],
    theta: float | None,
) -> tuple[list[Hit], list[Dropped]]:
    """Retriever -> reranker -> threshold -> gate for one query's fused candidates."""
    from localgpt_cli.rag.rerank import rerank

    fused_top = {c.row.chunk_id: c for c in ranked[:k]}
    reranked = rerank(ranked, query, parts)
    kept, dropped = cut_candidates(reranked, k, threshold, mode)
    if theta is not None:
        scored = support(kept)
        kept, gated = [], [c for c in scored if (c.gate or 0.0) < theta]
        kept = [c for c in scored if (c.gate or 0.0) >= theta]
        dropped += [c.dropped("gate", "gate", c.gate) for c in gated]
    seen = {c.row.chunk_id for c in kept} | {(d.document_id, d.chunk) for d in dropped}
    for c in fused_top.values():
        if c.row.chunk_id not in seen and (c.row.chunk.document_id, c.row.chunk.ordinal) not in seen:
            dropped.append(c.dropped("rerank_cutoff", "rerank"))
    return [hit(c, i, mode) for i, c in enumerate(kept, 1)], dropped


def support(kept: list[Candidate]) -> list[Candidate]:
    """Set each candidate's `gate`: how likely it addresses the question, 0 to 1."""
    for c in kept:
        c.gate = 1.0
    return kept
