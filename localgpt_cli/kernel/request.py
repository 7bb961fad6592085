"""What one turn is asked: the question with everything from the command line that shapes
it (`TurnRequest`), and the tools it may use (`Toolbox`). Kept apart from `session.py`,
which runs the turn, so a command can build a request without the turn's machinery."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localgpt_cli.kernel.answer.pipeline import AnswerOptions
from localgpt_cli.kernel.context import DEFAULT_WINDOW
from localgpt_cli.kernel.facts import MemoryFact
from localgpt_cli.kernel.grounding import ContextFile
from localgpt_cli.kernel.loop import DEFAULT_MAX_ITERATIONS, Approve
from localgpt_cli.kernel.memory import MemorySettings
from localgpt_cli.structured.spec import StructuredSpec

if TYPE_CHECKING:
    from localgpt_cli.images import Picture
    from localgpt_cli.tools.base import Tool
    from localgpt_cli.tools.selection import Selection


@dataclass
class Toolbox:
    """The tools enabled for a turn, and how to pick the ones offered to the model."""

    tools: list[Tool]
    select: Callable[[list[Tool], str], Selection] | None = None
    approve: Approve | None = None
    groups: list[str] | None = None  # the context filter `select` applies (None: all)
    files: dict[str, Any] | None = None  # `done.files`: the current folder was left out
    approve_network: Callable[[str, dict[str, Any]], bool | None] | None = None  # kernel/loop


@dataclass
class TurnRequest:
    """Everything one turn needs from the command line."""

    model: str
    prompt: str
    provider: str = "ollama"  # the profile whose server answers (done.provider)
    system: str | None = None
    stdin_text: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    think: bool | None = None  # None: think when the model can
    stream: bool = True
    conversation_id: str | None = None  # continue this conversation (a full id)
    window: int = DEFAULT_WINDOW
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    files: list[ContextFile] = field(default_factory=list)
    memory: MemorySettings = field(default_factory=MemorySettings)
    project_memory: list[MemoryFact] = field(default_factory=list)  # right after the system
    answer: AnswerOptions | None = None  # the grounding pipeline (None: its defaults)
    images: list[Picture] = field(default_factory=list)  # shown to the model with the prompt
    keep_images: bool = False  # history.keep_images: store their bytes, not only hashes
    structured: StructuredSpec | None = None  # --schema: the answer is JSON meeting it

    def user_content(self, piped: str | None = None) -> str:
        """The prompt with piped text (or `piped`, that text cut to fit) attached ahead of
        it: the instruction reads last."""
        piped = self.stdin_text if piped is None else piped
        if piped and self.prompt:
            return f"{piped.rstrip()}\n\n{self.prompt}"
        return self.prompt or (piped or "")
