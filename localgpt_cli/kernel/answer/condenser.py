"""The condenser: the kept passages -> S_ctx, `{"facts", "constraints", "open_issues"}`,
every item citing the passages it came from.

The answer model then reads a few checked statements instead of five raw excerpts. The
answer is checked against the shipped schema (schemas/condensed.schema.json) and every
citation must name a kept passage; on any failure the prompt builder gets the kept
passages verbatim instead, and the reason is reported (`sources.fallback_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.kernel.answer.stage import (
    ModelCaller,
    PipelineState,
    StageFallback,
    StageSkipped,
    passages_text,
)
from localgpt_cli.kernel.context import estimate_tokens

SYSTEM = (
    "You condense passages from a user's documents for answering their question. List "
    "the facts the passages state that bear on the question, the constraints (conditions, "
    "limits, versions) and the open issues (what the passages leave unanswered). Use only "
    "what the passages say; cite every item with the ids of the passages it comes from. "
    "Answer with JSON only."
)
SECTIONS = ("facts", "constraints", "open_issues")
# Passages that take at most this share of the prompt's budget are sent verbatim: a few
# short excerpts are already what S_ctx would be, and condensing them costs a model call.
FITS_SHARE = 0.15
# The answer's tokens at most: the JSON frame, and per passage a fact or two citing it.
CAP_BASE, CAP_PER_PASSAGE = 64, 160


def passages_fit(state: PipelineState) -> bool:
    """Whether the kept passages already fit a small share of the prompt's budget."""
    if state.budget is None or state.force_condense:
        return False
    used = sum(estimate_tokens(str(p.get("text", ""))) + 16 for p in state.kept)
    return used <= state.budget * FITS_SHARE


def unknown_citations(condensed: dict[str, Any], ids: list[str]) -> list[str]:
    known = set(ids)
    return sorted({c for s in SECTIONS for item in condensed[s] for c in item["cites"]} - known)


@dataclass
class Condenser:
    caller: ModelCaller
    name: str = "condenser"

    def run(self, state: PipelineState) -> None:
        state.condensed, state.condense_fallback = None, None
        if passages_fit(state):
            state.condense_fallback = "passages_fit"
            raise StageSkipped("passages_fit")
        ids = state.ids()
        shipped = schemas.load("condensed")
        user = f"Question: {state.query}\n\nPassages:\n{passages_text(state.kept)}"
        value = self.caller.ask(SYSTEM, user, schemas.with_ids(shipped, ids), check=shipped,
                                cap=CAP_BASE + CAP_PER_PASSAGE * len(ids))  # fmt: skip
        unknown = unknown_citations(value, ids)
        if unknown:
            raise StageFallback("unknown_citation", ", ".join(unknown))
        if not any(value[s] for s in SECTIONS):
            raise StageFallback("empty", "no fact, constraint or open issue")
        state.condensed = value

    def fallback(self, state: PipelineState, reason: str) -> None:
        state.condensed, state.condense_fallback = None, reason
