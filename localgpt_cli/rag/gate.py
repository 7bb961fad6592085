"""The gate: drops passages of the top k that do not address the question, by strictness θ.

Each kept passage gets a support score in 0..1 and stays when it reaches θ (0 keeps all
the reranker kept, 1 only near-certain support):

    support = absolute * (1 - RELATIVE_SHARE + RELATIVE_SHARE * rerank / best rerank)
    absolute = the larger of (similarity - floor) / (certain - floor)
               and (words - WORDS_FLOOR) / (1 - WORDS_FLOOR), each clipped to 0..1

`absolute` is what separates a question the collection cannot answer (no passage is
close in meaning to it, nor holds most of its words), `relative` how far below the
query's best passage this one is. `words` is the share of the query's words (stemmed,
stop words out) in a passage the keyword side found: a passage with every word of
"wireguard" is support whatever an embedding model makes of one rare word. A passage
the vector side did not return gets that side's lowest similarity.

Calibration (tests/bench/rerank.py, all-MiniLM-L6-v2, Cranfield and click's API
reference, top 5 after the reranker): questions asked of the other collection top out at
cosine 0.23 (Cranfield's of click's docs: median 0.08, max 0.23; click's of Cranfield:
median 0.14, p95 0.23), while relevant passages score >= 0.47 (Cranfield, 5th
percentile) and >= 0.25 (click, 5th percentile: short questions in other words than the
docs'). So the floor is 0.20 and near-certain is 0.60 (above the median relevant passage
of either); the words' floor is 0.6 (off-topic questions find at most 60% of their words
in one passage, 95% of them at most 50%). The default θ = 0.15 puts the cut for a
query's best passage at cosine 0.26: it keeps nothing for 100% and 98% of the off-topic
questions and keeps 100% / 93% of the relevant passages.

What it cannot do is tell relevant from non-relevant passages *of the topic*: on
Cranfield no score the fast path has does (the similarity's AUC between relevant and
non-relevant top-5 passages is 0.56). Relative features per query were tried too
(tests/bench/gate_features.py: rank, gaps to the best passage's similarity, BM25 and
rerank score, agreement of the two sides' ranks, the document's other passages, IDF-weighted
query-term coverage, similarity to the centroid of the top 5/10/20 and to a Rocchio
query), a logistic regression fitted on one half of the questions and measured on the
other: on Cranfield the held-out AUC is 0.61-0.64 and at 90% of the relevant kept it drops
21-24% of the non-relevant (95%: 13-16%, 85%: 26-31%, 80%: 30-39%); the best single
feature is the similarity to the top 5's centroid (AUC 0.63). On click's docs the same
features reach AUC 0.77-0.79 (19-38% dropped at 90% kept), and a cut calibrated on one
half keeps only 75-81% of the other half's relevant passages there, so no calibrated
default met the target without losing relevant passages; the default stays. That needs
a model that reads the passage: a provider's cross-encoder (`--rerank-model`, judge.py),
whose relevance is then the support θ is compared with, or `--gate model`. Models
without calibration get a floor 0.1 below their default --threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

from localgpt_cli.rag.fusion import Candidate, Dropped, cut_candidates, hit
from localgpt_cli.rag.types import Hit, Judge

DEFAULT_THETA = 0.15
RELATIVE_SHARE = 0.5
# model family -> (floor, near-certain) cosine similarity; see the module docstring.
GATE_SCALES: dict[str, tuple[float, float]] = {"all-minilm": (0.20, 0.60)}
CERTAIN_SPAN = 0.40
WORDS_FLOOR = 0.6
JUDGE_DEPTH = 20  # candidates a provider's reranker re-scores (at least 2k)


def scale_for(model: str | None, threshold: float) -> tuple[float, float]:
    """The (floor, near-certain) similarities of `model`'s cosine scale."""
    name = (model or "").lower()
    for family, scale in GATE_SCALES.items():
        if family in name:  # all-minilm, all-minilm:l6-v2, local:all-minilm-l6-v2
            return scale
    floor = max(threshold - 0.1, 0.0)
    return floor, floor + CERTAIN_SPAN


def support(kept: list[Candidate], scale: tuple[float, float], query: str) -> None:
    """Set each candidate's `gate`: how well it supports an answer, 0 to 1."""
    from localgpt_cli.rag.rerank import terms

    words = terms(query)
    floor, certain = scale
    sims = [c.similarity for c in kept if c.similarity is not None]
    lowest = min(sims) if sims else floor
    best = max((c.strength for c in kept), default=0.0)
    for c in kept:
        similarity = lowest if c.similarity is None else c.similarity
        absolute = _clip((similarity - floor) / (certain - floor))
        if words and c.keyword_rank is not None:
            chunk = c.row.chunk
            # title and text apart (the same words as both joined): both are cached
            shared = len((words & terms(chunk.text)) | (words & terms(chunk.title or "")))
            found = shared / len(words)
            absolute = max(absolute, _clip((found - WORDS_FLOOR) / (1 - WORDS_FLOOR)))
        relative = c.strength / best if best > 0 else 1.0
        c.gate = absolute * (1 - RELATIVE_SHARE + RELATIVE_SHARE * max(relative, 0.0))


def _clip(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def judge_depth(k: int) -> int:
    """How many candidates a provider's reranker re-scores for a top k: at least twice k,
    so it can bring up a passage the local reranker put just below the cut."""
    return max(JUDGE_DEPTH, 2 * k)


def fast_path(
    ranked: list[Candidate],
    query: str,
    k: int,
    threshold: float | None,
    mode: str,
    parts: Sequence[str],
    theta: float | None,
    scale: tuple[float, float] | None = None,
    judge: Judge | None = None,
    notes: list[str] | None = None,
    depth: int | None = None,
) -> tuple[list[Hit], list[Dropped]]:
    """Reranker -> [provider's reranker] -> threshold -> gate over one query's fused
    candidates: the top k hits, and what was dropped on the way from the fused top k
    (stage and reason each). With a `judge` (a cross-encoder, judge.py) the gate keeps a
    passage when its relevance reaches θ; it re-scores the first `depth` candidates (else
    judge_depth(k)). A judge that fails leaves a line in `notes` and the local scores
    stand."""
    from localgpt_cli.rag.rerank import rerank

    fused_top = ranked[:k]
    reranked = rerank(ranked, query, parts)
    if judge is not None:
        from localgpt_cli.rag.judge import judge_candidates

        reranked = judge_candidates(reranked, query, judge, depth or judge_depth(k), notes)
    kept, dropped = cut_candidates(reranked, k, threshold, mode)
    judged = any(c.judged is not None for c in kept)  # False too when the judge failed
    if theta is not None and (mode != "keyword" or judged):
        # Keyword mode has no similarity to judge by; a cross-encoder's score needs none.
        unjudged = [c for c in kept if c.judged is None]
        support(unjudged, scale or scale_for(None, threshold or 0.0), query)
        for c in kept:
            c.gate = c.gate if c.judged is None else c.judged
        dropped += [c.dropped("gate", "gate", c.gate) for c in kept if (c.gate or 0) < theta]
        kept = [c for c in kept if (c.gate or 0.0) >= theta]
    seen = {(c.row.chunk.document_id, c.row.chunk.ordinal) for c in kept}
    seen |= {(d.document_id, d.chunk) for d in dropped}
    for c in fused_top:
        if (c.row.chunk.document_id, c.row.chunk.ordinal) not in seen:
            dropped.append(c.dropped("rerank_cutoff", "rerank"))
    return [hit(c, rank, mode) for rank, c in enumerate(kept, 1)], dropped
