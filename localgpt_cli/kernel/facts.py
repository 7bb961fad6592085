"""Project memory in the prompt: its one system block, and its share of the budget.

Facts (`localgpt memory add`) ride along with every prompt, so without a limit a few
hundred of them leave no room for the question, and the error then blamed the question
(issue 25). They get `memory.project_share` of the prompt budget; when they take more,
facts are left out — the important ones kept first, then the most recent — and the turn
warns, naming `localgpt memory rm`. What is sent keeps the facts' own order (oldest
first), and an error that memory caused says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from localgpt_cli.kernel.context import MESSAGE_OVERHEAD, estimate_tokens

PROJECT_HEADER = (
    "Project memory: facts the user keeps for this work. They hold unless the user says "
    "otherwise in this conversation, and they outrank the files, sources and earlier "
    "turns below."
)
DEFAULT_SHARE = 0.25  # of the prompt budget; `memory.project_share`
RM_HINT = "see them with `localgpt memory list` and remove some with `localgpt memory rm ID`"


@dataclass(frozen=True)
class MemoryFact:
    """A fact as a turn receives it: its text, and whether the user marked it important
    (`memory add --important`), which keeps it when not every fact fits."""

    text: str
    important: bool = False


@dataclass(frozen=True)
class FactsFit:
    """The facts a turn sends, and what the share left out."""

    texts: list[str]  # sent, oldest first
    tokens: int  # what the sent block takes (estimated, with its header)
    total: int  # what every fact would take
    room: int  # the share, in estimated tokens
    left_out: int

    def warning(self, count: int, share: float, context_length: int, model: str) -> str:
        """The `project_memory_budget` warning: what was left out, and what to do."""
        return (
            f"project memory: {self.left_out:,} of {count:,} facts left out; they take "
            f"~{self.total:,} tokens and their share (memory.project_share = {share:g}) of "
            f"the prompt is ~{self.room:,} with the {context_length:,}-token context of "
            f"{model}. The important and the most recent facts were sent: {RM_HINT}, "
            "or raise memory.project_share."
        )


def project_block(facts: Sequence[str]) -> str:
    """The one system message that carries project memory (`localgpt memory add`)."""
    return "\n".join([PROJECT_HEADER, *(f"- {fact}" for fact in facts)])


def block_tokens(facts: Sequence[str]) -> int:
    """Estimated tokens of the facts' system message (0 without facts): the header, and a
    line per fact."""
    if not facts:
        return 0
    return MESSAGE_OVERHEAD + estimate_tokens(project_block(facts))


def fit_facts(facts: Sequence[MemoryFact], budget: int, share: float) -> FactsFit:
    """The facts that fit `share` of `budget` estimated tokens: important ones first,
    then the newest, each that still fits (a long fact does not shut out shorter ones)."""
    facts = [f for f in facts if f.text.strip()]
    room = max(int(budget * share), 0)
    texts = [f.text.strip() for f in facts]
    total = block_tokens(texts)
    if total <= room:
        return FactsFit(texts, total, total, room, 0)
    costs = [estimate_tokens(f"- {text}") + 1 for text in texts]  # a line, and its newline
    used = MESSAGE_OVERHEAD + estimate_tokens(PROJECT_HEADER)
    keep: set[int] = set()
    for i in sorted(range(len(facts)), key=lambda i: (not facts[i].important, -i)):
        if used + costs[i] <= room:
            keep.add(i)
            used += costs[i]
    sent = [texts[i] for i in sorted(keep)]
    return FactsFit(sent, block_tokens(sent), total, room, len(facts) - len(keep))


def send_facts(facts: Sequence[MemoryFact], budget: int, share: float, context_length: int,
               model: str, warn: Callable[[str, str], None]) -> FactsFit:  # fmt: skip
    """`fit_facts`, with the `project_memory_budget` warning when some were left out."""
    fit = fit_facts(facts, budget, share)
    if fit.left_out:
        count = sum(1 for f in facts if f.text.strip())
        warn("project_memory_budget", fit.warning(count, share, context_length, model))
    return fit


def blame(fit: FactsFit, needed: int, room: int) -> tuple[str, str | None]:
    """For the error of a question that does not fit: the part project memory takes of
    the prompt ("" without facts), and a hint naming `memory rm` when the question would
    fit without the facts (None: the caller's own hint)."""
    if not fit.tokens:
        return "", None
    part = f"project memory (~{fit.tokens:,} tokens), "
    if needed > room + fit.tokens:
        return part, None
    return part, (f"Project memory takes the room the question needs: {RM_HINT}, or lower "
                  "memory.project_share.")
