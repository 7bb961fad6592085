"""The in-process llama.cpp provider: a GGUF model run by `llama-cpp-python` inside this
process, so chat works with no server at all (extra `[llamacpp]`).

`llama_cpp.Llama.create_chat_completion` answers in the OpenAI chat format, chunk for
chunk as an OpenAI-compatible server streams it, so its chunks go through the same
`Assembly` as the HTTP provider's SSE events (llm/openai.py): thinking, tool calls
assembled by `index`, `finish_reason` and usage come out as the same `Chunk`s, and the
kernel cannot tell the two apart. The model is loaded on the first request (a few hundred
ms for a small model), never for `--help`, `config` or `models list`.

One `Llama` is one native context: two calls on it at once corrupt its memory (a pipeline
stage abandoned on its thread while the answer started was a GGML_ASSERT, then a gdb
backtrace on stdout and exit 134). So one call runs at a time (`_busy`), and a call made
on a thread bound to an event (`cancel_on`) stops at its next token once the event is set:
even a whole answer (`chat`) is read as a stream, token by token, so there is a point
between two tokens to stop at. (A logits processor cannot stop it: llama-cpp-python calls
it from a C callback, which drops its exceptions.)
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, LocalGPTError, ModelError, ModelNotFound
from localgpt_cli.llm.openai import OPTION_FIELDS, Assembly, Chunk
from localgpt_cli.llm.openai_messages import wire_messages
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
        self._busy = threading.Lock()  # one call on the native context at a time
        self._cancel = threading.local()  # this thread's event, set by `cancel_on`

    def problem(self) -> InvalidInput | None:
        """Why this profile cannot run here (no such file, no llama-cpp-python), found
        without loading anything: chat refuses in one line before it starts, `models list`
        warns."""
        if not self.path.is_file():
            return InvalidInput(f"model_path of [providers.{self.name}] is not a file: "
                                f"{self.path}.", hint="Point it at a .gguf file.")
        if importlib.util.find_spec("llama_cpp") is None:
            return InvalidInput(f"Provider {self.name!r} needs llama-cpp-python.",
                                hint=f"Install it: {INSTALL}.")  # fmt: skip
        return None

    def cancel_on(self, event: threading.Event | None) -> None:
        """Calls made on this thread from now on stop at their next token once `event` is
        set (a pipeline stage past its deadline), raising ModelError."""
        self._cancel.event = event

    def _cancelled(self) -> bool:
        event = getattr(self._cancel, "event", None)
        return event is not None and event.is_set()

    def _load(self, model: str) -> Any:
        if model != self.model:
            raise ModelNotFound(f"Model {model!r} is not offered by provider {self.name!r}.",
                                hint=f"Offered: {self.model}.")  # fmt: skip
        if self._llm is None:
            found = self.problem()
            if found is not None:
                raise found
            # A native abort would fork gdb, whose backtrace goes to fd 1: stdout is for
            # the answer and the records, never for that.
            os.environ.setdefault("GGML_NO_BACKTRACE", "1")
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
                  format: str | dict[str, Any] | None = None,  # noqa: A002
                  ) -> Generator[Any, None, None]:  # fmt: skip
        """The completion's chunks as llama.cpp produces them (always a stream)."""
        llm = self._load(model)
        kwargs: dict[str, Any] = {OPTION_FIELDS[k]: v for k, v in (options or {}).items()
                                  if k in OPTION_FIELDS}  # fmt: skip
        if tools:
            kwargs["tools"] = list(tools)
        if format is not None:  # llama.cpp turns the schema into a grammar
            kwargs["response_format"] = {"type": "json_object"} | (
                {"schema": format} if isinstance(format, dict) else {})
        try:
            return llm.create_chat_completion(messages=wire_messages(messages), stream=True,
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
        """Chunks as llama.cpp produces tokens; the last one is `done` with the tool calls.
        The model is held until the stream ends or is closed."""
        state = Assembly()
        with self._busy:
            for event in self._complete(model, messages, tools, options):
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
        """The whole answer as one chunk, read token by token (see the module's note)."""
        state, content, thinking = Assembly(), [], []
        with self._busy:
            events = self._complete(model, messages, tools, options, format)
            try:
                for event in events:
                    if self._cancelled():
                        raise ModelError(f"llama.cpp on {self.path.name}: stopped, past "
                                         "its deadline")  # fmt: skip
                    chunk = state.feed(event, self.host)
                    if chunk is not None:
                        content.append(chunk.message.content or "")
                        thinking.append(chunk.message.thinking or "")
            except LocalGPTError:
                raise
            except Exception as exc:  # llama.cpp's own failure half way
                raise ModelError(f"llama.cpp failed on {self.path.name}: {exc}") from exc
            finally:
                events.close()  # generation stops here, the context consistent
        last = state.last()
        last.message.content = "".join(content) or None
        last.message.thinking = "".join(thinking) or None
        return last

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
