"""Passage relevance from a reranker model a provider serves (a cross-encoder).

Ollama has no rerank endpoint; the servers that do (llama.cpp's `llama-server
--reranking`, vLLM, LocalAI, Infinity, and the Jina and Cohere APIs) share one wire:

    POST {base_url}/rerank  {"model", "query", "documents": [text, ...], "top_n"}
    -> {"results": [{"index": i, "relevance_score": x}, ...]}   (any order)

Hugging Face TEI's `/rerank` is another wire (`texts` in, a bare list of `score`s out;
llama.cpp answers in that form too when a request carries `texts`): not spoken here.

A cross-encoder reads the question and the passage together, which is what the fast
path's scores cannot do (rag/gate.py), so its score is what the gate should judge by.
Servers differ in scale: Jina and Cohere send probabilities, llama.cpp the raw logit.
A reply with any score outside 0..1 is read as logits and put through the logistic
function, so θ means the same on every server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from localgpt_cli.errors import ModelError


def relevance(provider: Any, model: str, query: str, documents: Sequence[str]) -> list[float]:
    """Each document's relevance to `query` in 0..1, in the documents' order: one request
    to an OpenAI-kind profile's server (llm/openai.py's errors: exit 3, 4, 77...). Only
    such a profile gets here: cli/retrieval.rerank_judge refuses the others."""
    if not documents:
        return []
    body = {"model": model, "query": query, "documents": list(documents),
            "top_n": len(documents)}  # fmt: skip
    reply = provider.whole("POST", "/rerank", body, model)
    return _scores(reply, len(documents), provider.host)


def _scores(reply: Any, count: int, host: str) -> list[float]:
    """The reply's scores by index; a reply that does not score every document once is
    a server bug named in one line, not a silently shorter list."""
    results = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(results, list):
        raise ModelError(f"{host} sent a rerank reply without a results list.",
                         code="bad_response")  # fmt: skip
    raw: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score") if isinstance(item, dict) else None
        if (not isinstance(index, int) or not 0 <= index < count or index in raw
                or not isinstance(score, int | float) or not math.isfinite(score)):  # fmt: skip
            raise ModelError(f"{host} sent a rerank result localgpt cannot read: {item!r:.120}",
                             code="bad_response")  # fmt: skip
        raw[index] = float(score)
    if len(raw) != count:
        raise ModelError(f"{host} scored {len(raw)} of {count} passages.", code="bad_response")
    scores = [raw[i] for i in range(count)]
    if any(not 0.0 <= s <= 1.0 for s in scores):
        return [1.0 / (1.0 + math.exp(-max(min(s, 50.0), -50.0))) for s in scores]
    return scores
