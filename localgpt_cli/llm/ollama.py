"""The Ollama provider: the one place that talks to Ollama, and the map from its failures
to our errors.

The `ollama` client raises a different thing for each way a request can fail (httpx
errors, a builtin ConnectionError, ResponseError with a status or -1 mid-stream,
JSON and pydantic errors for replies it cannot read). Everything above this module sees
only `localgpt_cli.errors`, so exit codes stay stable whatever the client does.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import (
    LocalGPTError,
    ModelError,
    ModelNotFound,
    OllamaTimeout,
    OllamaUnreachable,
    ServerBusy,
    UnsupportedCapability,
)
from localgpt_cli.llm.deadline import Expired, Limits, paced, within
from localgpt_cli.llm.provider import EmbedStats, ModelInfo, ModelSummary

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Provider

START_HINT = (
    "Start it with `ollama serve` (or the Ollama app), "
    "or set OLLAMA_HOST to where it runs."
)


@dataclass
class RunningModel:
    name: str
    size: int
    size_vram: int
    context_length: int | None
    expires_at: str | None

    def to_record(self) -> dict[str, Any]:
        return {"type": "running_model", **self.__dict__}


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    iso = getattr(value, "isoformat", None)
    return iso() if iso else str(value)


class OllamaClient:
    """A thin, error-translating wrapper around `ollama.Client` for one host. `timeout`
    is the time to the first token (and to a whole reply), `idle` the time between
    tokens (llm/deadline.py): the client's own timeout bounds one read, not an answer."""

    def __init__(self, host: str, timeout: float | None = None,
                 idle: float | None = None) -> None:  # fmt: skip
        self.host = host
        self.timeout = timeout
        self.limits = Limits.of(timeout, idle)
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import ollama

            self._client = ollama.Client(host=self.host, timeout=self.limits.backstop)
        return self._client

    # -- errors ----------------------------------------------------------------

    def translate(self, exc: BaseException, model: str | None = None) -> LocalGPTError:
        """Map anything the client raised to one of our errors."""
        import httpx
        import ollama

        if isinstance(exc, LocalGPTError):
            return exc
        if isinstance(exc, Expired):
            return exc.error(f"Ollama at {self.host}")
        if isinstance(exc, ollama.ResponseError):
            return self._response_error(exc, model)
        if isinstance(exc, httpx.TimeoutException):
            return OllamaTimeout(
                f"Ollama at {self.host} did not answer in time ({exc}).",
                hint="Raise --timeout, or check that the server is not overloaded.",
            )
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            return OllamaUnreachable(
                f"The connection to Ollama at {self.host} was lost mid-answer ({exc}).",
                code="connection_lost",
                hint="Check the server log; the partial answer was kept.",
            )
        if isinstance(exc, httpx.ConnectError | ConnectionError | OSError):
            return OllamaUnreachable(f"Ollama is not reachable at {self.host}.", hint=START_HINT)
        if isinstance(exc, ValueError):  # JSONDecodeError and pydantic.ValidationError
            return ModelError(
                f"Ollama at {self.host} sent a reply localgpt cannot read: {exc}".splitlines()[0],
                code="bad_response",
            )
        return ModelError(f"Unexpected error talking to Ollama at {self.host}: {exc!r}")

    def _response_error(self, exc: Any, model: str | None) -> LocalGPTError:
        status, text = exc.status_code, str(exc.error)
        lowered = text.lower()
        if status == -1:
            return ModelError(f"Ollama failed while answering: {text}", code="model_error")
        if status == 404 or "not found" in lowered:
            return ModelNotFound(f"Model {model!r} is not available at {self.host}.")
        if status == 503:
            return ServerBusy(f"Ollama at {self.host} is busy: {text}", hint="Try again shortly.")
        if "invalid format" in lowered:  # a server older than JSON Schema formats
            return UnsupportedCapability(f"Ollama at {self.host} refused the format: {text}",
                                         code="format_unsupported")
        if "does not support" in lowered:
            what = next((w for w in ("tools", "thinking", "chat", "embed") if w in lowered), "it")
            return UnsupportedCapability(
                f"Model {model!r} does not support {what}.", code=f"{what}_unsupported"
            )
        return ModelError(f"Ollama answered HTTP {status}: {text}")

    @contextlib.contextmanager
    def _errors(self, model: str | None = None) -> Iterator[None]:
        try:
            yield
        except LocalGPTError:
            raise
        except Exception as exc:  # every client failure becomes one of ours
            raise self.translate(exc, model) from exc

    # -- chat ------------------------------------------------------------------

    def _chat_request(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        think: bool | str | None,
        options: dict[str, Any] | None,
        keep_alive: str | float | None,
        stream: bool,
        format: str | dict[str, Any] | None = None,  # noqa: A002 - Ollama's field name
    ) -> Any:
        return self.client.chat(
            model=model,
            messages=list(messages),
            tools=list(tools) if tools else None,
            think=think,
            options=options or None,
            keep_alive=keep_alive,
            stream=stream,
            format=format,
        )

    def chat_stream(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
        keep_alive: str | float | None = None,
    ) -> Iterator[Any]:
        """Yield ChatResponse chunks, read on a worker thread under the time limits;
        closing this generator closes the HTTP stream when its next chunk arrives."""
        with self._errors(model):
            stream = self._chat_request(model, messages, tools, think, options, keep_alive, True)
            yield from paced(stream, self.limits, _is_token)

    def chat(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
        keep_alive: str | float | None = None,
        format: str | dict[str, Any] | None = None,  # noqa: A002 - Ollama's field name
    ) -> Any:
        """One whole ChatResponse (stream: false); `format` asks for structured output."""
        with self._errors(model):
            return within(lambda: self._chat_request(model, messages, tools, think, options,
                                                     keep_alive, False, format),
                          self.limits)  # fmt: skip

    # -- models ----------------------------------------------------------------

    def show(self, model: str) -> ModelInfo:
        with self._errors(model):
            reply = within(lambda: self.client.show(model), self.limits)
        info = dict(reply.modelinfo or {})
        context = next(
            (int(v) for k, v in info.items() if k.endswith(".context_length") and v), None
        )
        details = reply.details
        return ModelInfo(
            name=model,
            capabilities=list(reply.capabilities or []),
            context_length=context,
            family=details.family if details else None,
            parameter_size=details.parameter_size if details else None,
            quantization=details.quantization_level if details else None,
            parameters=reply.parameters,
            template=reply.template,
            modified_at=_iso(reply.modified_at),
        )

    def list_models(self) -> list[ModelSummary]:
        with self._errors():
            reply = within(self.client.list, self.limits)
        out = []
        for m in reply.models:
            d = m.details
            out.append(
                ModelSummary(
                    name=m.model or "",
                    size=int(m.size or 0),
                    family=d.family if d else None,
                    parameters=d.parameter_size if d else None,
                    quantization=d.quantization_level if d else None,
                    modified_at=_iso(m.modified_at),
                    digest=m.digest,
                )
            )
        return out

    def running(self) -> list[RunningModel]:
        with self._errors():
            reply = within(self.client.ps, self.limits)
        return [
            RunningModel(
                name=m.model or m.name or "",
                size=int(m.size or 0),
                size_vram=int(m.size_vram or 0),
                context_length=getattr(m, "context_length", None),
                expires_at=_iso(m.expires_at),
            )
            for m in reply.models
        ]

    def pull(self, model: str) -> Iterator[dict[str, Any]]:
        """Yield pull progress as dicts: status, digest, total, completed."""
        try:
            with self._errors(model):
                for p in self.client.pull(model, stream=True):
                    yield {
                        "status": p.status,
                        "digest": p.digest,
                        "total": p.total,
                        "completed": p.completed,
                    }
        except ModelError as exc:
            # The registry's "file does not exist" arrives as an error line mid-stream.
            if "does not exist" in exc.message or "not found" in exc.message:
                raise ModelNotFound(
                    f"No model {model!r} to pull from the registry.",
                    hint="Check the name at https://ollama.com/library.",
                ) from exc
            raise

    # -- hosted web tools (need OLLAMA_API_KEY; always ollama.com) --------------

    def web_search(self, query: str, max_results: int = 5) -> Any:
        with self._errors():
            return self.client.web_search(query=query, max_results=max_results)

    def web_fetch(self, url: str) -> Any:
        with self._errors():
            return self.client.web_fetch(url=url)

    # -- embeddings ------------------------------------------------------------

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        retries: int = 3,
        stats: EmbedStats | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[list[float]]:
        """Embed `inputs` in batches of `batch_size`, retrying transient failures.

        Transient means the server was busy or the connection dropped: those retry with
        exponential backoff (0.5 s, 1 s, 2 s). A missing model, a bad request or a server
        that let the time limit pass (the user's limit, not to be multiplied) does not.
        """
        stats = stats if stats is not None else EmbedStats()
        vectors: list[list[float]] = []
        start = time.perf_counter()
        for i in range(0, len(inputs), batch_size):
            batch = list(inputs[i : i + batch_size])
            for attempt in range(retries + 1):
                try:
                    with self._errors(model):
                        stats.requests += 1
                        embed = partial(self.client.embed, model=model, input=batch)
                        reply = within(embed, self.limits)
                    break
                except (ServerBusy, OllamaUnreachable) as exc:
                    if attempt == retries or exc.code in ("ollama_unreachable",
                                                          "ollama_timeout"):  # fmt: skip
                        raise
                    stats.retries += 1
                    sleep(0.5 * 2**attempt)
            got = [list(v) for v in reply.embeddings]
            if len(got) != len(batch):
                raise ModelError(
                    f"Ollama returned {len(got)} embeddings for {len(batch)} inputs.",
                    code="bad_response",
                )
            vectors.extend(got)
            stats.inputs += len(batch)
        stats.seconds += time.perf_counter() - start
        return vectors


def _is_token(chunk: Any) -> bool:
    """A chunk that moves the answer on; an empty one (a keep-alive) does not."""
    message = chunk.message
    return bool(chunk.done or message.content or message.thinking or message.tool_calls)


if TYPE_CHECKING:
    # The type checker holds the client to the protocol the kernel is written against.
    _provider: Provider = OllamaClient("")
