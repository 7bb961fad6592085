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
    passages_text,
)

SYSTEM = (
    "You condense passages from a user's documents for answering their question. List "
    "the facts the passages state that bear on the question, the constraints (conditions, "
    "limits, versions) and the open issues (what the passages leave unanswered). Use only "
    "what the passages say; cite every item with the ids of the passages it comes from. "
    "Answer with JSON only."
)
SECTIONS = ("facts", "constraints", "open_issues")


def unknown_citations(condensed: dict[str, Any], ids: list[str]) -> list[str]:
    known = set(ids)
    return sorted({c for s in SECTIONS for item in condensed[s] for c in item["cites"]} - known)


@dataclass
class Condenser:
    caller: ModelCaller
    name: str = "condenser"

    def run(self, state: PipelineState) -> None:
        state.condensed, state.condense_fallback = None, None
        ids = state.ids()
        shipped = schemas.load("condensed")
        user = f"Question: {state.query}\n\nPassages:\n{passages_text(state.kept)}"
        value = self.caller.ask(SYSTEM, user, schemas.with_ids(shipped, ids), check=shipped)
        unknown = unknown_citations(value, ids)
        if unknown:
            raise StageFallback("unknown_citation", ", ".join(unknown))
        if not any(value[s] for s in SECTIONS):
            raise StageFallback("empty", "no fact, constraint or open issue")
        state.condensed = value

    def fallback(self, state: PipelineState, reason: str) -> None:
        state.condensed, state.condense_fallback = None, reason
