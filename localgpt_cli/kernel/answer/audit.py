"""Shaper pass 2 (audit): re-read the task against S_ctx, and say whether its scope
changed.

The first pass labelled the question before anything was found; what the passages say
can show that the user meant something else ("the pump" is the cooling pump of the
document, not the fuel pump the query named). The audit may revise intent and domain;
only `scope: changed` with a different query asks the pipeline for its single re-run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.kernel.answer.shaper import turns_text
from localgpt_cli.kernel.answer.stage import (
    ModelCaller,
    PipelineState,
    StageSkipped,
    passages_text,
)

SYSTEM = (
    "You check a search for a user's question. Given the question, the query that was "
    "searched and what the found passages say, decide whether the query missed the scope "
    "of the task. Answer scope 'same' when the passages address the question; 'changed' "
    "only when the task clearly needs a different search, and then give that query. "
    "Revise intent and domain if needed. Answer with JSON only."
)
CAP = 224  # scope, intent, a domain label and a query of up to 500 characters, as JSON


def evidence(state: PipelineState) -> str:
    """S_ctx when there is one, else the kept passages (shortened)."""
    if state.condensed is not None:
        return json.dumps(state.condensed, ensure_ascii=False)
    return passages_text(state.kept, limit=400) or "(no passage was kept)"


@dataclass
class Audit:
    caller: ModelCaller
    name: str = "audit"

    def run(self, state: PipelineState) -> None:
        if state.condensed is None:  # S_ctx is what it re-reads the task against
            raise StageSkipped("not_condensed")
        user = (f"{turns_text(state.previous, state.question)}\n\nSearched query: "
                f"{state.query}\nIntent: {state.intent}\nDomain: {state.domain}\n\n"
                f"What was found:\n{evidence(state)}")  # fmt: skip
        value = self.caller.ask(SYSTEM, user, schemas.load("audit"), cap=CAP)
        state.intent, state.domain = value["intent"], value["domain"]
        query = " ".join(value["query"].split())
        if value["scope"] == "changed" and query.lower() != state.query.lower():
            state.scope_changed = True
            state.query = query

    def fallback(self, state: PipelineState, reason: str) -> None:
        pass  # the first pass stands
