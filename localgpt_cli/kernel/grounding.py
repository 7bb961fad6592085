"""What grounds an answer in the user's documents: --file blocks and retrieved excerpts.

Both become system messages placed after the system prompt and before the history
(the authority order, kernel/context.py), each excerpt labelled `[Source: name, chunk N]`
so the model can cite it and the user can check the citation against the `sources`
packet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from localgpt_cli.kernel.context import cut_middle
from localgpt_cli.rag.types import citation

CITE_INSTRUCTION = (
    "Answer from the sources above when they are relevant, and cite them by their "
    "labels, e.g. [Source: notes/vpn.md, chunk 3]. If they do not contain the answer, say "
    "so rather than guessing."
)
FILE_SHARE = 0.5  # at most this share of the prompt budget goes to --file contents


@dataclass
class ContextFile:
    """A file named with --file, as text."""

    path: str
    text: str


@dataclass
class Retrieved:
    """What retrieval found for a turn, ready for the `sources` packet."""

    query: str
    mode: str
    results: list[dict[str, Any]]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query": self.query, "mode": self.mode, "results": self.results}
        if self.dropped:
            out["dropped"] = self.dropped
        return out


Retriever = Callable[[str], Retrieved]


def sources_block(results: Sequence[dict[str, Any]]) -> str:
    """The kept passages verbatim, each under the label the model cites it by."""
    parts = ["Excerpts from the user's documents:"]
    for result in results:
        label = citation(result["path"], result["chunk"], result.get("page"))
        parts.append(f"{label}\n{result['text'].strip()}")
    parts.append(CITE_INSTRUCTION)
    return "\n\n".join(parts)


def files_block(
    files: Sequence[ContextFile], budget_tokens: int, warn: Callable[[str, str], None],
    cuts: list[dict[str, Any]],
) -> str | None:
    """The --file contents as one system block; each file gets an equal share of the budget.

    A file cut to its share is warned about and appended to `cuts` (the `done` packet's
    list of what the model did not see)."""
    if not files:
        return None
    share = max(int(budget_tokens * FILE_SHARE) // len(files), 256)
    parts = ["Files the user attached:"]
    for f in files:
        text, cut = cut_middle(f.text, share)
        if cut:
            warn("file_truncated",
                 f"{f.path} is too large for the context; sending its head and tail.")
            cuts.append({"source": "file", "path": f.path, "chars": len(f.text), "cut_chars": cut})
        parts.append(f"=== {f.path} ===\n{text}")
    return "\n\n".join(parts)
