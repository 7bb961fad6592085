"""The prompt builder: the pinned system blocks in a fixed authority order.

    system rules -> project memory -> FILES (--file) -> S_ctx (or the kept passages)

and then the task (the history window and the question, kernel/context.py). What the
user wrote outranks what they keep as memory, which outranks the files they attached,
which outrank what retrieval found: a later block never overrides an earlier one.

Two last cuts are made here and reported as dropped passages: a passage from a file the
user attached whole (`duplicate_of_file`), and passages beyond the share of the budget
sources may take (`budget`, lowest rank first). When nothing is kept the model gets no
sources block but a note that no document covered the question, so the answer says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from localgpt_cli.kernel.answer.stage import PipelineState
from localgpt_cli.kernel.context import estimate_tokens
from localgpt_cli.kernel.facts import project_block
from localgpt_cli.kernel.grounding import CITE_INSTRUCTION, ContextFile, sources_block
from localgpt_cli.rag.types import citation

SOURCES_SHARE = 0.4  # at most this share of the prompt budget goes to retrieved passages
NO_SOURCE_NOTE = (
    "No document in the user's knowledge base covered this question (searched for: "
    "{query!r}). Begin the answer by saying that no document covered it; answer from "
    "general knowledge only if you can, and say that is what you did."
)


def _same_file(path: str, files: Sequence[ContextFile]) -> bool:
    """Whether an ingested `path` is one of the attached files (by resolved path, or by
    the stored path being the attached one's tail: ingest stores paths relative)."""
    here = os.path.realpath(path)
    for f in files:
        there = os.path.realpath(f.path)
        if here == there or there.endswith(os.sep + path.lstrip("./")):
            return True
    return False


def _drop(state: PipelineState, passage: dict[str, Any], reason: str) -> None:
    state.kept.remove(passage)
    state.dropped.append({**passage, "stage": "prompt", "reason": reason})


def fit_passages(state: PipelineState, files: Sequence[ContextFile], budget: int) -> None:
    """Drop passages the prompt will not carry: duplicates of attached files, then what
    exceeds the sources' share of the budget (S_ctx replaces the passages, so only the
    verbatim passages are counted)."""
    for p in [p for p in state.kept if _same_file(p["path"], files)]:
        _drop(state, p, "duplicate_of_file")
    if state.condensed is not None:
        return
    room = int(budget * SOURCES_SHARE)
    used = 0
    for p in list(state.kept):
        used += estimate_tokens(p.get("text", "")) + 16
        if used > room and p is not state.kept[0]:
            _drop(state, p, "budget")
    for rank, p in enumerate(state.kept, 1):
        p["rank"] = rank


def condensed_block(state: PipelineState) -> str:
    """S_ctx as the model reads it: each item followed by the labels of its passages."""
    labels = {p["id"]: citation(p["path"], p["chunk"], p.get("page"))
              for p in [*state.kept, *state.dropped] if "id" in p}  # fmt: skip
    parts = ["What the user's documents say about the question (condensed, with sources):"]
    for section, title in (("facts", "Facts"), ("constraints", "Constraints"),
                           ("open_issues", "Open issues")):  # fmt: skip
        items = (state.condensed or {}).get(section) or []
        if items:
            lines = [f"- {i['text']} {' '.join(labels.get(c, c) for c in i['cites'])}"
                     for i in items]  # fmt: skip
            parts.append(f"{title}:\n" + "\n".join(lines))
    parts.append(CITE_INSTRUCTION)
    return "\n\n".join(parts)


def grounding_block(state: PipelineState) -> str | None:
    """S_ctx, else the kept passages verbatim, else (nothing kept, nothing attached
    covering it) the note that no document covered the question."""
    if state.condensed is not None and state.kept:
        return condensed_block(state)
    if state.kept:
        return sources_block(state.kept)
    if any(d.get("reason") == "duplicate_of_file" for d in state.dropped):
        return None  # the attached file is the source
    return NO_SOURCE_NOTE.format(query=state.query)


def pinned_blocks(system: str | None, memory: Sequence[str], files: str | None,
                  state: PipelineState | None) -> list[dict[str, Any]]:  # fmt: skip
    """The system messages before the history, in the authority order."""
    facts = [m.strip() for m in memory if m.strip()]
    blocks = [system, project_block(facts) if facts else None, files,
              grounding_block(state) if state is not None else None]  # fmt: skip
    return [{"role": "system", "content": b} for b in blocks if b]


def grounded(state: PipelineState | None) -> bool | None:
    """`done.grounded`: whether passages (or S_ctx) reached the model; None without
    retrieval."""
    return None if state is None else bool(state.kept)
