"""A provider's reranker (a cross-encoder) over the local reranker's short list.

The local reranker orders the candidates from scores computed apart from each other (a
passage's embedding, its BM25); a cross-encoder reads question and passage together and
is the one score on which a relevant passage and an on-topic but useless one differ
(rag/gate.py's docstring has the figures). It costs one request per question, so it
re-scores only the first `depth` candidates the local reranker left, and the rest keep
their order behind them.
"""

from __future__ import annotations

from localgpt_cli.errors import LocalGPTError
from localgpt_cli.rag.fusion import Candidate
from localgpt_cli.rag.titles import embed_body
from localgpt_cli.rag.types import Judge


def passage(c: Candidate) -> str:
    """What the cross-encoder reads: what the embedder read (the document's title, then the
    text; the title once when the chunk already opens with it)."""
    return embed_body(c.row.chunk.title, c.row.chunk.text)


def judge_candidates(candidates: list[Candidate], query: str, judge: Judge, depth: int,
                     notes: list[str] | None) -> list[Candidate]:  # fmt: skip
    """`candidates` with the first `depth` re-ordered by the judge's relevance (ties keep
    the local order). A judge that fails (server down, a reply it cannot read) leaves the
    local order and a line in `notes`: the search still answers, and says so."""
    head, tail = candidates[:depth], candidates[depth:]
    if not head:
        return candidates
    try:
        scores = judge(query, [passage(c) for c in head])
    except LocalGPTError as exc:
        if notes is not None:
            notes.append(f"The reranker failed ({exc.message}): the local reranker's order "
                         "and gate stand.")  # fmt: skip
        return candidates
    for c, score in zip(head, scores, strict=True):
        c.judged = score
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    return [head[i] for i in order] + tail
