"""The pipeline: which stages run, in what order, the single re-run, and the report.

    shaper -> retriever (its local reranker and score gate) -> [model reranker]
      -> [model gate] -> condenser -> audit -> (scope changed: retriever ... condenser, once)

`--pipeline fast` runs the retriever alone behind the deterministic shaper: no chat-model
call. The full pipeline calls the model only where that can change something: no shaper
call for a first question (no earlier turn to resolve), no condenser when the kept
passages already fit a small share of the budget (unless `--condense`), no audit without
S_ctx. Every stage's outcome (ok, fallback with its reason, skipped, error) is recorded
for the `sources` packet; a stage that raises is a bug, recorded in `failures` for the
turn to surface as an `error` packet, and the turn goes on with the stage's fallback.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localgpt_cli.kernel.answer.stage import (
    DEFAULT_STAGE_TIMEOUT,
    ModelCaller,
    PipelineState,
    Stage,
    StageFallback,
    StageSkipped,
)
from localgpt_cli.kernel.grounding import Retriever

MODEL_STAGES = ("rerank_model", "gate_model", "condenser")  # need kept passages
SCORE_SIDE = {"hybrid": "fused", "vector": "vector", "keyword": "bm25"}


@dataclass(frozen=True)
class AnswerOptions:
    """How a turn grounds its answer, from chat's flags and the `rag.*` settings."""

    pipeline: str = "full"  # "full" | "fast"
    reranker: str = "local"  # "local" (the retriever's) | "model"
    gate: str = "score"  # "score" (the retriever's) | "model"
    condense: bool = True
    force_condense: bool = False  # `--condense`: even passages that already fit
    theta: float | None = None  # the gate's strictness; None: the gate's default
    stage_timeout: float = DEFAULT_STAGE_TIMEOUT


@dataclass
class Retrieval:
    """The retriever as a stage: kept passages get ids P1..Pn (what the model stages and
    the condenser cite), dropped ones X1..Xm."""

    retriever: Retriever
    name: str = "retriever"

    def run(self, state: PipelineState) -> None:
        found = self.retriever(state.query)  # a LocalGPTError ends the pipeline (no sources)
        state.mode = found.mode
        side = SCORE_SIDE.get(found.mode, "fused")  # what `score` is, before per-stage scores
        state.kept = [{"scores": {side: r.get("score")}, **r, "id": f"P{i}"}
                      for i, r in enumerate(found.results, 1)]  # fmt: skip
        state.dropped = [{"stage": "threshold", "scores": {"vector": d.get("score")}, **d,
                          "id": f"X{i}"} for i, d in enumerate(found.dropped, 1)]  # fmt: skip
        state.warnings += found.warnings

    def fallback(self, state: PipelineState, reason: str) -> None:
        state.kept, state.dropped = [], []


def step(stage: Stage, state: PipelineState, round_: int) -> None:
    """Run one stage and record what became of it."""
    start = time.perf_counter()
    report: dict[str, Any] = {"stage": stage.name, "status": "ok"}
    if round_ > 1:
        report["round"] = round_
    if stage.name in MODEL_STAGES and not state.kept:
        report.update(status="skipped", reason="nothing_kept")
    else:
        try:
            stage.run(state)
        except StageSkipped as exc:
            report.update(status="skipped", reason=exc.reason)
        except StageFallback as exc:
            stage.fallback(state, exc.reason)
            report.update(status="fallback", reason=exc.reason)
            if exc.detail:
                report["detail"] = exc.detail[:200]
        except Exception as exc:  # noqa: BLE001 - a stage's bug must not lose the answer
            from localgpt_cli.errors import LocalGPTError

            if isinstance(exc, LocalGPTError) and stage.name == "retriever":
                raise
            stage.fallback(state, "error")
            state.failures.append(f"the {stage.name} stage failed: {exc!r}")
            report.update(status="error", reason="error")
    report["ms"] = int((time.perf_counter() - start) * 1000)
    state.reports.append(report)


@dataclass
class Pipeline:
    """`first` runs once; when the audit changes the task's scope, `again` runs once more
    with the revised query (and one more model request allowed). Never a second re-run."""

    first: Sequence[Stage]
    again: Sequence[Stage]
    audit: Stage | None = None
    caller: ModelCaller | None = None
    mode: str = "full"
    force_condense: bool = False

    def run(self, question: str, previous: list[str], budget: int | None = None) -> PipelineState:
        """The stages for this question; `budget` (the prompt's tokens) lets the condenser
        tell passages that already fit from ones worth condensing."""
        state = PipelineState(question=question, previous=previous, query=question,
                              budget=budget, force_condense=self.force_condense)  # fmt: skip
        for stage in self.first:
            step(stage, state, 1)
        if self.audit is None:
            return state
        step(self.audit, state, 1)
        if state.scope_changed:
            state.rerun = True
            state.condensed = state.condense_fallback = None
            if self.caller is not None:
                self.caller.budget += 1
            for stage in self.again:
                step(stage, state, 2)
        return state


def build(options: AnswerOptions, retriever: Retriever, caller: ModelCaller | None) -> Pipeline:
    """The stages `options` ask for. No caller (or `fast`): no model-driven stage."""
    from localgpt_cli.kernel.answer.shaper import FastShaper

    retrieval = Retrieval(retriever)
    if options.pipeline == "fast" or caller is None:
        return Pipeline([FastShaper(), retrieval], [], mode="fast")
    from localgpt_cli.kernel.answer.audit import Audit
    from localgpt_cli.kernel.answer.condenser import Condenser
    from localgpt_cli.kernel.answer.gate_model import DEFAULT_THETA, ModelGate
    from localgpt_cli.kernel.answer.rerank_model import ModelReranker
    from localgpt_cli.kernel.answer.shaper import Shaper

    judged: list[Stage] = [retrieval]
    if options.reranker == "model":
        judged.append(ModelReranker(caller))
    if options.gate == "model":
        theta = DEFAULT_THETA if options.theta is None else options.theta
        judged.append(ModelGate(caller, theta))
    if options.condense:
        judged.append(Condenser(caller))
    return Pipeline([Shaper(caller), *judged], judged, Audit(caller), caller, mode="full",
                    force_condense=options.force_condense)  # fmt: skip


def condense_reason(state: PipelineState, mode: str, condense: bool) -> str | None:
    """Why `condensed` is null: the condenser's fallback reason, or why it did not run."""
    if state.condensed is not None:
        return None
    if mode == "fast":
        return "fast_pipeline"
    if not condense:
        return "disabled"
    return state.condense_fallback or ("nothing_kept" if not state.kept else "not_run")


def payload(state: PipelineState, mode: str, condense: bool = True) -> dict[str, Any]:
    """The `sources` packet: what was searched, what was kept and dropped and why, what
    each stage did, S_ctx or why there is none, and whether the search ran twice."""

    def brief(p: dict[str, Any]) -> dict[str, Any]:
        out = {k: p[k] for k in ("id", "rank", "document_id", "path", "chunk", "page")
               if p.get(k) is not None}  # fmt: skip
        out["scores"] = dict(p.get("scores") or {})
        return out

    dropped = []
    for d in state.dropped:
        entry = brief(d)
        entry.update(score=d.get("score"), stage=d.get("stage", "threshold"),
                     reason=d.get("reason", "below_threshold"))  # fmt: skip
        if d.get("verdict"):
            entry["verdict"] = d["verdict"]
        dropped.append(entry)
    return {
        "query": state.query,
        "question": state.question,
        "mode": state.mode,
        "pipeline": mode,
        "intent": state.intent,
        "domain": state.domain,
        "results": [{k: v for k, v in p.items() if k != "scores"} for p in state.kept],
        "kept": [brief(p) for p in state.kept],
        "dropped": dropped,
        "condensed": state.condensed,
        "fallback_reason": condense_reason(state, mode, condense),
        "rerun": state.rerun,
        "stages": state.reports,
    }
