"""Shaper pass 1: the question plus the last few turns -> a standalone retrieval query,
an intent and a domain label.

"and how do I undo that?" searched as those six words finds nothing; searched with the
turn it follows it finds the passage. The model does this in one structured call; when
that fails, `fallback_query` joins the question with the previous user turn when the
question is short or leans on it ("it", "that", "and …?"), and leaves it alone otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.kernel.answer.stage import ModelCaller, PipelineState, StageSkipped

SHORT_WORDS = 5  # a question this short rarely stands alone
# The answer's tokens at most: a query of up to 500 characters (~130 tokens), the intent,
# the domain label and the JSON around them.
CAP = 192
_ANAPHORA = re.compile(
    r"\b(it|its|that|this|those|these|they|them|there|one|ones|same|above|previous|"
    r"former|latter|he|she|his|her)\b|^\s*(and|but|also|what about|how about|so|then)\b",
    re.IGNORECASE,
)
SYSTEM = (
    "You rewrite a user's latest question into a standalone search query for their "
    "documents. Resolve references to earlier turns (it, that, and ...?) using them. Keep "
    "the user's own key terms; add none they did not imply. Label the intent and give a "
    "short domain label (a few words). Answer with JSON only."
)


def leans_on_context(question: str) -> bool:
    """Whether the question is short or anaphoric, so it needs the turn before it."""
    return len(question.split()) <= SHORT_WORDS or bool(_ANAPHORA.search(question))


def fallback_query(question: str, previous: list[str]) -> str:
    """The deterministic standalone query: the previous user turn joined in front of a
    question that leans on it; the question alone otherwise."""
    if previous and leans_on_context(question):
        return f"{previous[-1].strip()} {question.strip()}"
    return question.strip()


def turns_text(previous: list[str], question: str, keep: int = 3) -> str:
    earlier = "\n".join(f"- {t.strip()[:500]}" for t in previous[-keep:])
    head = f"Earlier user turns, oldest first:\n{earlier}\n\n" if earlier else ""
    return f"{head}Latest question:\n{question}"


@dataclass
class Shaper:
    """Pass 1, model-driven; `fallback_query` when the model call fails. A first
    question has no earlier turn to resolve: it is searched as asked, with no call."""

    caller: ModelCaller
    name: str = "shaper"

    def run(self, state: PipelineState) -> None:
        if not state.previous:
            state.query = fallback_query(state.question, state.previous)
            raise StageSkipped("no_history")
        value = self.caller.ask(SYSTEM, turns_text(state.previous, state.question),
                                schemas.load("shape"), cap=CAP)  # fmt: skip
        state.query = " ".join(value["query"].split())
        state.intent, state.domain = value["intent"], value["domain"]

    def fallback(self, state: PipelineState, reason: str) -> None:
        state.query = fallback_query(state.question, state.previous)


@dataclass
class FastShaper:
    """The shaper of `--pipeline fast`: no model call, the deterministic query."""

    name: str = "shaper"

    def run(self, state: PipelineState) -> None:
        state.query = fallback_query(state.question, state.previous)

    def fallback(self, state: PipelineState, reason: str) -> None:
        state.query = state.question
