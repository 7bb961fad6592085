"""The OpenAI-compatible provider: `/v1/chat/completions`, `/v1/models`, `/v1/embeddings`
as vLLM, llama.cpp's server, LM Studio and OpenAI itself speak them.

It talks httpx directly (installed with ollama) and reads the SSE stream with a few lines
of its own: the stream is `data: {json}` lines ending in `data: [DONE]`, and no event
names, ids or multi-line data are used by these servers, so a parser library would only
add an import. Answers leave as the same `ChatChunk` shape the Ollama client yields, so
the kernel needs no branch: `reasoning_content` (or `reasoning`) becomes thinking, tool
calls are assembled by `index` from their argument pieces and parsed once complete (a
call whose arguments are not a JSON object carries `error`, which the agent loop hands
back to the model as a tool error), and `finish_reason` becomes `done_reason`.

The API key is read from the environment variable the profile names, sent only as the
`Authorization` header, and never stored, printed or logged.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import (
    LocalGPTError,
    ModelError,
    ModelNotFound,
    OllamaUnreachable,
    UnsupportedCapability,
)
from localgpt_cli.llm.deadline import Limits, paced, within
from localgpt_cli.llm.openai_http import (
    complete_lines,
    moves_answer,
    retry_after,
    status_error,
    translate,
)
from localgpt_cli.llm.openai_messages import wire_messages
from localgpt_cli.llm.provider import EmbedStats, ModelInfo, ModelSummary
from localgpt_cli.llm.tool_refusals import ToolRefusals

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from localgpt_cli.llm.provider import Provider

RETRIES_429 = 3  # 429 answers retried before giving up (exit 75)
# Ollama's option names -> the OpenAI request fields that mean the same
OPTION_FIELDS = {"temperature": "temperature", "top_p": "top_p", "seed": "seed",
                 "num_predict": "max_tokens", "stop": "stop",
                 "presence_penalty": "presence_penalty",
                 "frequency_penalty": "frequency_penalty"}  # fmt: skip


@dataclass
class Function:
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # the arguments were not a JSON object: why


@dataclass
class ToolCall:
    function: Function


@dataclass
class Message:
    content: str | None = None
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None


@dataclass
class Chunk:
    """One piece of the answer, shaped as the kernel reads Ollama's ChatResponse."""

    message: Any = field(default_factory=Message)  # a Message (Any: the protocol's is private)
    done: bool | None = False
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


def parse_call(name: str, raw: str) -> ToolCall:
    """A complete call; arguments that are not a JSON object become `error`."""
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return ToolCall(Function(name, {}, f"its arguments are not valid JSON ({exc})"))
    if not isinstance(args, dict):
        return ToolCall(Function(name, {}, "its arguments are not a JSON object"))
    return ToolCall(Function(name, args))


class Assembly:
    """What a stream has said so far: tool-call pieces by index, finish reason, usage."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.args: dict[int, list[str]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}

    def feed(self, event: dict[str, Any], host: str) -> Chunk | None:
        if event.get("error"):  # the server failed mid-answer
            error = event["error"]
            detail = error.get("message", error) if isinstance(error, dict) else error
            raise ModelError(f"{host} failed while answering: {detail}")
        self.usage = event.get("usage") or self.usage
        choices = event.get("choices") or []
        if not choices:
            return None
        choice = choices[0]
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") or choice.get("message") or {}
        for call in delta.get("tool_calls") or []:
            i = int(call.get("index", len(self.names)))
            fn = call.get("function") or {}
            if fn.get("name"):
                self.names[i] = self.names.get(i, "") + fn["name"]
            self.args.setdefault(i, []).append(fn.get("arguments") or "")
        thinking = delta.get("reasoning_content") or delta.get("reasoning")
        content = delta.get("content")
        if not thinking and not content:
            return None
        return Chunk(Message(content=content or None, thinking=thinking or None))

    def last(self) -> Chunk:
        calls = [parse_call(self.names.get(i, ""), "".join(self.args[i]))
                 for i in sorted(self.args)]  # fmt: skip
        return Chunk(
            Message(tool_calls=calls or None), done=True, done_reason=self.finish,
            prompt_eval_count=self.usage.get("prompt_tokens"),
            eval_count=self.usage.get("completion_tokens"),
        )  # fmt: skip


def whole_reply(reply: dict[str, Any], host: str) -> Chunk:
    """A non-streamed completion as one `done` chunk, assembled as a stream is."""
    state = Assembly()
    first = state.feed(reply, host)
    last = state.last()
    if first is not None:
        last.message.content, last.message.thinking = first.message.content, \
            first.message.thinking  # fmt: skip
    return last


class OpenAIProvider:
    """A client of one OpenAI-compatible server, as one `[providers.NAME]` profile says.

    `timeout` is the time to the first token (and to a whole reply), `idle` the time
    between tokens (llm/deadline.py). `capabilities` None (the profile does not say)
    offers tools until the server refuses them for a model, which `refusals` remembers.
    """

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "openai",
        api_key_env: str | None = None,
        timeout: float | None = None,
        idle: float | None = None,
        capabilities: Sequence[str] | None = None,
        context_length: int | None = None,
        refusals: Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.host = base_url.rstrip("/")
        self.name = name
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.limits = Limits.of(timeout, idle)
        self.capabilities = None if capabilities is None else list(capabilities)
        self.context_length = context_length
        self.refusals = ToolRefusals(refusals)
        self.sleep = sleep
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            import httpx

            headers = {}
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            if key:
                headers["Authorization"] = f"Bearer {key}"
            # Plain http:// has no TLS, so the CA bundle is not loaded (0.1 s of every
            # start-up); redirects are not followed, so no https:// is reached unverified.
            self._http = httpx.Client(base_url=self.host, headers=headers,
                                      timeout=httpx.Timeout(self.limits.backstop),
                                      verify=self.host.startswith("https://"))  # fmt: skip
        return self._http

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except LocalGPTError:
            raise
        except Exception as exc:  # every client failure becomes one of ours
            raise translate(exc, self.host, self.name) from exc

    @contextlib.contextmanager
    def request(self, method: str, path: str, body: Any, model: str | None = None,
                 stream: bool = False) -> Iterator[httpx.Response]:  # fmt: skip
        """One request, 429 retried (honouring Retry-After); non-2xx -> our error (a
        refusal of tools is remembered for the profile and model)."""
        for attempt in range(RETRIES_429 + 1):
            request = self.http.build_request(method, path, json=body)
            response = self.http.send(request, stream=stream)
            try:
                if response.status_code == 429 and attempt < RETRIES_429:
                    response.close()
                    self.sleep(retry_after(response, attempt))
                    continue
                if response.status_code >= 400:
                    response.read()
                    error = status_error(response, self.host, self.name, self.api_key_env,
                                         model, bool(body and body.get("tools")),
                                         bool(body and body.get("response_format")))  # fmt: skip
                    if error.code == "tools_unsupported" and model is not None:
                        self.refusals.remember(self.name, self.host, model)
                    raise error
                yield response
                return
            finally:
                response.close()

    def whole(self, method: str, path: str, body: Any, model: str | None = None) -> Any:
        """A request that does not stream: its JSON reply, within the first-token limit."""
        def call() -> Any:
            with self.request(method, path, body, model) as response:
                return response.json()

        with self.errors():
            return within(call, self.limits)

    # -- chat ------------------------------------------------------------------

    def _body(self, model: str, messages: Sequence[dict[str, Any]],
              tools: Sequence[dict[str, Any]] | None, options: dict[str, Any] | None,
              stream: bool) -> dict[str, Any]:  # fmt: skip
        if tools and self.capabilities is None \
                and self.refusals.refused(self.name, self.host, model):  # fmt: skip
            raise UnsupportedCapability(f"{model!r} at {self.host} refused tools before.",
                                        code="tools_unsupported")  # fmt: skip
        body: dict[str, Any] = {"model": model, "messages": wire_messages(messages),
                                "stream": stream}  # fmt: skip
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = list(tools)
        for key, value in (options or {}).items():
            if key in OPTION_FIELDS:
                body[OPTION_FIELDS[key]] = value
        return body

    def _events(self, body: dict[str, Any], model: str) -> Iterator[dict[str, Any] | None]:
        """The stream's `data:` events as JSON (None for `[DONE]`), on the reader thread;
        a comment is an empty event, so a reader abandoned at the deadline stops there."""
        import orjson

        with self.request("POST", "/chat/completions", body, model, stream=True) as response:
            for line in complete_lines(response.iter_bytes()):
                if not line.startswith(b"data:"):
                    if line.startswith(b":"):  # a keep-alive: moves nothing, lets paced look
                        yield {}
                    continue  # blank separators, `event:` lines
                data = line[5:].strip()
                if data == b"[DONE]":
                    yield None
                    return
                yield orjson.loads(data)

    def chat_stream(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool | str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Iterator[Chunk]:
        """Chunks as the SSE events arrive; the last one is `done` with the tool calls."""
        body = self._body(model, messages, tools, options, True)
        state = Assembly()
        finished = False
        with self.errors():
            for event in paced(self._events(body, model), self.limits, moves_answer):
                if event is None:
                    finished = True
                    break
                chunk = state.feed(event, self.host)
                if chunk is not None:
                    yield chunk
        if not finished and state.finish is None:
            raise OllamaUnreachable(
                f"The answer from {self.host} ended before it was complete.",
                code="connection_lost", hint="The partial answer was kept.",
            )
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
        body = self._body(model, messages, tools, options, False)
        if isinstance(format, dict):  # OpenAI's structured outputs
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": format}}
        elif format == "json":
            body["response_format"] = {"type": "json_object"}
        return whole_reply(self.whole("POST", "/chat/completions", body, model), self.host)

    # -- models ----------------------------------------------------------------

    def list_models(self) -> list[ModelSummary]:
        data = self.whole("GET", "/models", None).get("data") or []
        return [ModelSummary(name=str(m.get("id", "")), size=0, family=None, parameters=None,
                             quantization=None, modified_at=None) for m in data]  # fmt: skip

    def show(self, model: str) -> ModelInfo:
        """What the profile says the model can do (/v1/models names models, nothing more);
        a profile that does not say offers tools unless the server refused them."""
        if model not in {m.name for m in self.list_models()}:
            raise ModelNotFound(f"Model {model!r} is not offered at {self.host}.")
        capabilities = self.capabilities
        if capabilities is None:
            refused = self.refusals.refused(self.name, self.host, model)
            capabilities = [] if refused else ["tools"]
        return ModelInfo(name=model, capabilities=list(capabilities),
                         context_length=self.context_length)  # fmt: skip

    # -- embeddings ------------------------------------------------------------

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        stats = stats if stats is not None else EmbedStats()
        start = time.perf_counter()
        vectors: list[list[float]] = []
        for i in range(0, len(inputs), batch_size):
            batch = list(inputs[i : i + batch_size])
            stats.requests += 1
            reply = self.whole("POST", "/embeddings", {"model": model, "input": batch}, model)
            data = sorted(reply.get("data") or [], key=lambda d: d.get("index", 0))
            if len(data) != len(batch):
                raise ModelError(f"{self.host} returned {len(data)} embeddings for "
                                 f"{len(batch)} inputs.", code="bad_response")  # fmt: skip
            vectors.extend([list(map(float, d["embedding"])) for d in data])
            stats.inputs += len(batch)
        stats.seconds += time.perf_counter() - start
        return vectors


if TYPE_CHECKING:
    _provider: Provider = OpenAIProvider("")
