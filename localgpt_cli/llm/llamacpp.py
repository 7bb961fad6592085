"""The in-process llama.cpp provider: a GGUF model run by `llama-cpp-python` inside this
process, so chat works with no server at all (extra `[llamacpp]`).

`llama_cpp.Llama.create_chat_completion` answers in the OpenAI chat format, chunk for
chunk as an OpenAI-compatible server streams it, so its chunks go through the same
`Assembly` as the HTTP provider's SSE events (llm/openai.py): thinking, tool calls
assembled by `index`, `finish_reason` and usage come out as the same `Chunk`s, and the
kernel cannot tell the two apart. The model is loaded on the first request (a few hundred
ms for a small model), never for `--help`, `config` or `models list`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, LocalGPTError, ModelError, ModelNotFound
from localgpt_cli.llm.openai import OPTION_FIELDS, Assembly, Chunk, whole_reply, wire_messages
from localgpt_cli.llm.provider import EmbedStats, ModelInfo, ModelSummary

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Provider

# localgpt is not on PyPI: an extra is installed from the source folder.
INSTALL = ("pip install -e '.[llamacpp]' (in the localgpt source folder; it builds llama.cpp, "
           "see the README's Development section for the CMAKE_ARGS some CPUs need)")
DEFAULT_CONTEXT = 4096


class LlamaCppProvider:
    """One GGUF file, served in this process under the name `model` (the profile's
    default_model, else the file's stem)."""

    def __init__(self, model_path: str, *, name: str = "llamacpp", model: str | None = None,
                 capabilities: Sequence[str] = (), context_length: int | None = None) -> None:
        self.path = Path(model_path).expanduser()
        self.name = name
        self.model = model or self.path.stem
        self.host = f"llamacpp:{self.path}"  # the model catalog keys its cache on it
        self.capabilities = list(capabilities)
        self.context_length = context_length or DEFAULT_CONTEXT
        self._llm: Any = None

    def _load(self, model: str) -> Any:
        if model != self.model:
            raise ModelNotFound(f"Model {model!r} is not offered by provider {self.name!r}.",
                                hint=f"Offered: {self.model}.")  # fmt: skip
        if self._llm is None:
            if not self.path.is_file():
                raise InvalidInput(f"model_path of [providers.{self.name}] is not a file: "
                                   f"{self.path}.", hint="Point it at a .gguf file.")
            if importlib.util.find_spec("llama_cpp") is None:
                raise InvalidInput(f"Provider {self.name!r} needs llama-cpp-python.",
                                   hint=f"Install it: {INSTALL}.")  # fmt: skip
            from llama_cpp import Llama

            try:
                self._llm = Llama(model_path=str(self.path), n_ctx=self.context_length,
                                  verbose=False)  # fmt: skip
            except (ValueError, RuntimeError) as exc:
                raise InvalidInput(f"llama.cpp cannot load {self.path}: {exc}",
                                   hint="Is it a GGUF model file?") from exc
        return self._llm

    def _complete(self, model: str, messages: Sequence[dict[str, Any]],
                  tools: Sequence[dict[str, Any]] | None, options: dict[str, Any] | None,
                  stream: bool, format: str | dict[str, Any] | None = None) -> Any:  # noqa: A002
        llm = self._load(model)
        kwargs: dict[str, Any] = {OPTION_FIELDS[k]: v for k, v in (options or {}).items()
                                  if k in OPTION_FIELDS}  # fmt: skip
        if tools:
            kwargs["tools"] = list(tools)
        if format is not None:  # llama.cpp turns the schema into a grammar
            kwargs["response_format"] = {"type": "json_object"} | (
                {"schema": format} if isinstance(format, dict) else {})
        try:
            return llm.create_chat_completion(messages=wire_messages(messages), stream=stream,
                                              **kwargs)  # fmt: skip
        except LocalGPTError:
            raise
        except Exception as exc:  # llama.cpp's own failure (context full, bad template)
            raise ModelError(f"llama.cpp failed on {self.path.name}: {exc}") from exc

    def chat_stream(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Iterator[Chunk]:
        """Chunks as llama.cpp produces tokens; the last one is `done` with the tool calls."""
        state = Assembly()
        for event in self._complete(model, messages, tools, options, True):
            chunk = state.feed(event, self.host)
            if chunk is not None:
                yield chunk
        yield state.last()

    def chat(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
        format: str | dict[str, Any] | None = None,  # noqa: A002 - Ollama's field name
    ) -> Chunk:
        reply = self._complete(model, messages, tools, options, False, format)
        return whole_reply(reply, self.host)

    def list_models(self) -> list[ModelSummary]:
        size = self.path.stat().st_size if self.path.is_file() else 0
        return [ModelSummary(name=self.model, size=size, family=None, parameters=None,
                             quantization=None, modified_at=None)]  # fmt: skip

    def show(self, model: str) -> ModelInfo:
        if model != self.model:
            raise ModelNotFound(f"Model {model!r} is not offered by provider {self.name!r}.")
        return ModelInfo(name=model, capabilities=list(self.capabilities),
                         context_length=self.context_length)  # fmt: skip

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        raise ModelError(f"Provider {self.name!r} (llama.cpp in process) does not embed.",
                         hint="Embed with Ollama, a local: model or an openai profile.")


if TYPE_CHECKING:
    _provider: Provider = LlamaCppProvider("")
