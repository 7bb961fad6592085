"""One turn's grounding, as kernel/session.py asks for it: the pipeline the options
describe, run for the question and the earlier user turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from localgpt_cli.kernel.answer.pipeline import AnswerOptions, build
from localgpt_cli.kernel.answer.stage import ModelCaller, PipelineState
from localgpt_cli.kernel.grounding import Retriever
from localgpt_cli.llm.provider import ModelInfo, Provider

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

# Stored messages read for the shaper's earlier user turns: a turn of tool calls stores
# an assistant message and a result per call for each round (up to 10 rounds), so a
# handful of messages may not reach back to the question before; 100 is cheap to read.
PREVIOUS_MESSAGES = 100


def previous_turns(store: Store | None, conversation_id: str | None) -> list[str]:
    """The conversation's earlier user messages, oldest first (none for a new one)."""
    if store is None or conversation_id is None:
        return []
    return [m.content for m in store.messages(conversation_id, last=PREVIOUS_MESSAGES)
            if m.role == "user" and m.content]  # fmt: skip


def ground(
    client: Provider,
    model: str,
    info: ModelInfo,
    retriever: Retriever,
    question: str,
    previous: list[str],
    options: AnswerOptions,
    warn: Callable[[str, str], None],
    budget: int | None = None,
) -> PipelineState:
    """Run the pipeline; its stage requests go to the turn's own model, with
    thinking off. Fallbacks are warned about; they are also in the `sources` packet.
    `budget`: the prompt's tokens, which decide whether condensing is worth a call."""
    caller = None
    if options.pipeline == "full":
        caller = ModelCaller(client, model, can_think=info.can_think,
                             timeout=options.stage_timeout)  # fmt: skip
    pipeline = build(options, retriever, caller)
    state = pipeline.run(question, previous, budget)
    for warning in state.warnings:
        warn("retrieval", warning)
    for report in state.reports:
        if report["status"] == "fallback" and report["reason"] != "budget":
            warn("stage_fallback", f"the {report['stage']} stage fell back "
                                   f"({report['reason']}); the answer goes on without it.")
    return state
