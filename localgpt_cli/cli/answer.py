"""chat's flags for the answer pipeline (kernel/answer/), and the options they make.

Kept apart from chat.py and turn.py so the pipeline's flags are one decorator there and
one call here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App
from localgpt_cli.cli.chat_flags import ChatFlags
from localgpt_cli.errors import UsageError, setting_error

if TYPE_CHECKING:
    from localgpt_cli.kernel.answer.pipeline import AnswerOptions

PIPELINES = ("full", "fast")

_OPTIONS = (
    click.option("--pipeline", type=click.Choice(PIPELINES), default=None,
                 help="full: shaper, judged sources and S_ctx by the chat model (at most 4 "
                      "extra requests); fast: retrieval only [default: rag.pipeline, full]."),
    click.option("--reranker", type=click.Choice(("local", "model")), default="local",
                 show_default=True,
                 help="model: the chat model re-scores the kept passages (one request)."),
    click.option("--gate", type=click.Choice(("score", "model")), default="score",
                 show_default=True,
                 help="model: the chat model judges which passages support an answer."),
    click.option("--condense/--no-condense", default=None,
                 help="Condense the kept passages into cited facts (S_ctx) [default: "
                      "rag.condense, on: when they take more than a small share of the "
                      "prompt]; --condense: always."),
    click.option("--explain", is_flag=True,
                 help="Print on stderr what was searched, which passages and earlier turns "
                      "were kept or dropped, and why."),
)  # fmt: skip


def answer_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """chat's pipeline options, as one decorator."""
    from localgpt_cli.cli.retrieval import rerank_model_option

    for option in reversed(_OPTIONS):
        command = option(command)
    return rerank_model_option(command)


def answer_options(app: App, flags: ChatFlags) -> AnswerOptions:
    """The pipeline the flags and the `rag.*` settings ask for; contradictions are usage
    errors here, before any model is called."""
    from localgpt_cli.cli.retrieval import rerank_model, resolve_theta
    from localgpt_cli.kernel.answer.pipeline import AnswerOptions

    values = app.settings.values
    pipeline = flags.pipeline or str(values["rag.pipeline"])
    if pipeline not in PIPELINES:  # only the setting's (--pipeline is a click.Choice)
        where = app.settings.named("rag.pipeline")
        raise setting_error(where, f"{where} is {pipeline!r}, which is not a pipeline.",
                            hint="Use full or fast.")
    judged_by_model = [f"--{name} model" for name, value in
                       (("reranker", flags.reranker), ("gate", flags.gate)) if value == "model"]
    if pipeline == "fast" and judged_by_model:
        raise UsageError(f"{judged_by_model[0]} asks the chat model, which the fast pipeline "
                         "never does.", hint="Use --pipeline full, or drop the option.")
    condense = flags.condense if flags.condense is not None else bool(values["rag.condense"])
    timeout = float(values["rag.stage_timeout"])
    if not timeout > 0:
        where = app.settings.named("rag.stage_timeout")
        raise setting_error(where, f"rag.stage_timeout must be above 0 seconds, got {timeout} "
                            f"(from {where}).", hint="Set it in the [rag] table: "
                            "stage_timeout = 60.")
    # One θ for both gates, checked here even when no knowledge base will be asked; None
    # lets the model gate keep its own default.
    resolve_theta(app, flags.theta)
    rerank_model(app)  # likewise the provider's reranker
    theta = values.get("rag.theta") if flags.theta is None else flags.theta
    return AnswerOptions(pipeline=pipeline, reranker=flags.reranker, gate=flags.gate,
                         condense=condense, force_condense=flags.condense is True,
                         theta=theta, stage_timeout=timeout)  # fmt: skip
