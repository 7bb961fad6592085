"""`--gate model`: the chat model gives an entailment verdict per kept passage (supports,
partial, unrelated) in one batched structured call; passages whose verdict scores below
θ are dropped (supports 1, partial 0.5, unrelated 0: θ 0 keeps everything, 1 only what
supports the answer). A passage the model gave no verdict for is kept: the gate drops
only on evidence."""

from __future__ import annotations

from dataclasses import dataclass

from localgpt_cli.kernel.answer.rerank_model import judged
from localgpt_cli.kernel.answer.stage import ModelCaller, PipelineState

SYSTEM = (
    "You check whether passages support an answer to a question. For each passage, by "
    "its id, answer 'supports' when it contains what answers the question, 'partial' "
    "when it helps but does not answer it, 'unrelated' otherwise. Answer with JSON only."
)
VERDICT_SCORE = {"supports": 1.0, "partial": 0.5, "unrelated": 0.0}
DEFAULT_THETA = 0.5


@dataclass
class ModelGate:
    caller: ModelCaller
    theta: float = DEFAULT_THETA
    name: str = "gate_model"

    def run(self, state: PipelineState) -> None:
        verdicts = judged(self.caller, state, SYSTEM, "gate", "verdict")
        kept = []
        for p in state.kept:
            verdict = verdicts.get(p["id"])
            if verdict is None:
                kept.append(p)
                continue
            score = VERDICT_SCORE[str(verdict)]
            p.setdefault("scores", {})["model_gate"] = score
            if score >= self.theta:
                kept.append(p)
            else:
                state.dropped.append({**p, "stage": "gate", "reason": "gate",
                                      "verdict": verdict})  # fmt: skip
        state.kept = kept
        for rank, p in enumerate(state.kept, 1):
            p["rank"] = rank

    def fallback(self, state: PipelineState, reason: str) -> None:
        pass  # what the score gate kept stands
