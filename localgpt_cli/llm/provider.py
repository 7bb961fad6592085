"""The provider protocol: what localgpt asks of a model server, and the records it answers with.

The kernel, the model catalog and the knowledge base are written against `Provider`, not
against a client: `OllamaClient` (llm/ollama.py) is today's implementation, and a second
provider is a new module beside it that implements these methods, not a new branch in
the kernel. The protocol holds only what those callers use; what a single server offers
beyond it (Ollama's pull, running models and hosted web tools) stays on its own client.

A provider raises only `localgpt_cli.errors`, so exit codes stay the same whichever
server answers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading


@dataclass
class ModelInfo:
    """What /api/show says about a model, reduced to what localgpt decides with."""

    name: str
    capabilities: list[str]
    context_length: int | None
    family: str | None = None
    parameter_size: str | None = None
    quantization: str | None = None
    parameters: str | None = None
    template: str | None = None
    modified_at: str | None = None

    @property
    def can_think(self) -> bool:
        return "thinking" in self.capabilities

    @property
    def can_use_tools(self) -> bool:
        return "tools" in self.capabilities

    def to_record(self) -> dict[str, Any]:
        template = (self.template or "").strip()
        first_line = template.splitlines()[0] if template else ""
        return {
            "type": "model_info",
            "name": self.name,
            "capabilities": self.capabilities,
            "context_length": self.context_length,
            "family": self.family,
            "parameters": self.parameter_size,
            "quantization": self.quantization,
            "model_parameters": self.parameters,
            "template_summary": {
                "lines": len(template.splitlines()),
                "chars": len(template),
                "first_line": first_line[:120],
            },
            "modified_at": self.modified_at,
        }


@dataclass
class ModelSummary:
    """One installed model, as `models list` shows it."""

    name: str
    size: int
    family: str | None
    parameters: str | None
    quantization: str | None
    modified_at: str | None
    digest: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "type": "model",
            "name": self.name,
            "size": self.size,
            "family": self.family,
            "parameters": self.parameters,
            "quantization": self.quantization,
            "modified_at": self.modified_at,
        }


@dataclass
class EmbedStats:
    """Counts kept by `embed`, so callers can report requests and retries."""

    requests: int = 0
    inputs: int = 0
    retries: int = 0
    seconds: float = field(default=0.0)


class _Function(Protocol):
    name: str
    arguments: Any


class _ToolCall(Protocol):
    function: _Function


class _Message(Protocol):
    content: str | None
    thinking: str | None
    tool_calls: Sequence[_ToolCall] | None


class ChatChunk(Protocol):
    """One piece of a chat answer, as the kernel's normalizer reads it.

    The `ollama` ChatResponse has these fields; another provider yields objects shaped
    alike, so the kernel needs no branch per provider.
    """

    message: _Message
    done: bool | None
    done_reason: str | None
    prompt_eval_count: int | None
    eval_count: int | None


class Provider(Protocol):
    """A model server to chat with, embed through, and ask about its models.

    What a model can do (think, call tools) and how long its context is come from
    `show`, as `ModelInfo.capabilities` and `context_length`: the kernel decides how to
    call a model from those before the first request.
    """

    host: str  # where the server runs; the model catalog keys its cache on it

    def chat_stream(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Iterator[ChatChunk]:
        """The answer as chunks; closing the iterator ends the request (by the next chunk)."""
        ...

    def chat(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
        format: str | dict[str, Any] | None = None,  # noqa: A002 - Ollama's field name
    ) -> ChatChunk:
        """The whole answer as one chunk (no streaming). `format`: "json" or a JSON Schema
        the answer's content must meet (structured output)."""
        ...

    def show(self, model: str) -> ModelInfo:
        """What `model` can do and how long its context is; ModelNotFound if absent."""
        ...

    def list_models(self) -> list[ModelSummary]:
        """The models installed on the server."""
        ...

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        """One vector per input, in order, counted into `stats` when given."""
        ...


class Embedder(Protocol):
    """What the knowledge base embeds through: a `Provider`, or the in-process embedder
    of llm/local.py that only embeds."""

    @property
    def host(self) -> str: ...

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        """One vector per input, in order, counted into `stats` when given."""
        ...


@runtime_checkable
class Cancellable(Protocol):
    """A provider whose calls share native state in this process (llama.cpp): a call past
    its deadline must be stopped and waited for, not abandoned on its thread while the
    next one starts. An HTTP provider's abandoned request costs nothing but a socket."""

    def cancel_on(self, event: threading.Event | None) -> None:
        """Calls made on this thread stop at their next token once `event` is set."""
        ...
