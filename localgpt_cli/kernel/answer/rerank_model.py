"""The model reranker: the chat model scores every kept passage's relevance (0-10) in one
batched structured call, and the passages are re-ordered by it.

The local reranker (the retriever's, no extra model) runs first; this option spends one
request to let the chat model judge the short list it left, which is where a judging
model helps most for the least time. Ties keep the local order.
"""

from __future__ import annotations

from dataclasses import dataclass

from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.kernel.answer.stage import (
    ModelCaller,
    PipelineState,
    StageFallback,
    passages_text,
)

SYSTEM = (
    "You judge search results. For each passage, rate from 0 to 10 how useful it is for "
    "answering the question (10: answers it directly; 0: unrelated). Rate every passage, "
    "by its id. Answer with JSON only."
)
# The answer's tokens at most: the JSON frame, and ~12 per item ({"id": "P3", ...}).
CAP_BASE, CAP_PER_PASSAGE = 16, 20


def judged(caller: ModelCaller, state: PipelineState, system: str, name: str,
           key: str) -> dict[str, object]:  # fmt: skip
    """One batched structured call over the kept passages: {id: the model's value of
    `key`}; a cited id that is not a kept passage is `unknown_citation`."""
    ids = state.ids()
    shipped = schemas.load(name)
    user = f"Question: {state.query}\n\nPassages:\n{passages_text(state.kept)}"
    field = "scores" if name == "rerank" else "verdicts"
    sent = schemas.with_ids(shipped, ids)
    # One item per passage at most: a server that turns the schema into a grammar then
    # stops a small model that would repeat items until its context is full.
    sent["properties"][field]["maxItems"] = len(ids)
    value = caller.ask(system, user, sent, check=shipped,
                       cap=CAP_BASE + CAP_PER_PASSAGE * len(ids))  # fmt: skip
    items = value[field]
    unknown = sorted({i["id"] for i in items} - set(ids))
    if unknown:
        raise StageFallback("unknown_citation", ", ".join(unknown))
    return {i["id"]: i[key] for i in items}


@dataclass
class ModelReranker:
    caller: ModelCaller
    name: str = "rerank_model"

    def run(self, state: PipelineState) -> None:
        scores = judged(self.caller, state, SYSTEM, "rerank", "relevance")
        for p in state.kept:
            if p["id"] in scores:
                p.setdefault("scores", {})["model_rerank"] = int(str(scores[p["id"]])) / 10
        order = sorted(range(len(state.kept)), key=lambda i: (
            -state.kept[i].get("scores", {}).get("model_rerank", -1.0), i))  # fmt: skip
        state.kept = [state.kept[i] for i in order]
        for rank, p in enumerate(state.kept, 1):
            p["rank"] = rank

    def fallback(self, state: PipelineState, reason: str) -> None:
        pass  # the local order stands
