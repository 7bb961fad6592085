"""One turn of a conversation: context -> model -> packets, ending in exactly one `done`.

A `Turn` is an iterator of packets with an `abort()` for Ctrl-C: whichever side the
interrupt lands on (inside the model stream or in the renderer), the caller gets the
`done` packet with reason `aborted`, the HTTP stream is closed, and what was produced
is stored. The user message is stored before the model is called and the answer when
the turn ends, however it ends: nothing the user typed or saw is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import LocalGPTError, ModelNotFound
from localgpt_cli.kernel.context import DEFAULT_WINDOW, assemble, needed_num_ctx
from localgpt_cli.kernel.normalize import Normalizer
from localgpt_cli.kernel.packets import PacketFactory, StreamPacket
from localgpt_cli.llm.catalog import ModelCatalog
from localgpt_cli.llm.client import ModelInfo, OllamaClient

if TYPE_CHECKING:
    from localgpt_cli.history.store import HistoryStore
    from localgpt_cli.history.types import Message

Warn = Callable[[str, str], None]


@dataclass
class TurnRequest:
    """Everything one turn needs from the command line."""

    model: str
    prompt: str
    system: str | None = None
    stdin_text: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    think: bool | None = None  # None: think when the model can
    stream: bool = True
    conversation_id: str | None = None  # continue this conversation (a full id)
    save: bool = True
    window: int = DEFAULT_WINDOW

    def user_content(self) -> str:
        """The prompt with piped text attached ahead of it (the instruction reads last)."""
        if self.stdin_text and self.prompt:
            return f"{self.stdin_text.rstrip()}\n\n{self.prompt}"
        return self.prompt or (self.stdin_text or "")


def _ms_since(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


def replay(messages: list[Message]) -> list[dict[str, Any]]:
    """Stored messages -> chat messages for the model.

    Thinking is not sent back (Ollama strips it from earlier turns anyway), and an
    assistant message that ended before saying anything is left out.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant" and not m.content and not m.tool_calls:
            continue
        chat: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            chat["tool_calls"] = m.tool_calls
        if m.tool_name:
            chat["tool_name"] = m.tool_name
        out.append(chat)
    return out


class Turn:
    """Iterate for packets; call `abort()` after an interrupt for the closing packets."""

    def __init__(
        self,
        client: OllamaClient,
        catalog: ModelCatalog,
        request: TurnRequest,
        *,
        store: HistoryStore | None = None,
        warn: Warn | None = None,
        factory: PacketFactory | None = None,
    ) -> None:
        self.client = client
        self.catalog = catalog
        self.request = request
        self.store = store
        self.factory = factory or PacketFactory()
        self.warn = warn or (lambda code, message: None)
        self.error: LocalGPTError | None = None
        self.finished = False
        self.iterations = 0
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.first_token_ms: int | None = None
        self.conversation_id = request.conversation_id
        self.message_id: str | None = None
        self.normalizer = Normalizer(self.factory)
        self._user_stored = False
        self._start = time.perf_counter()
        self._gen: Iterator[StreamPacket] | None = None

    # -- public ----------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamPacket]:
        if self._gen is None:
            self._gen = self._run()
        return self._gen

    def abort(self) -> list[StreamPacket]:
        """Close the model stream and return what is still owed: the `done` packet."""
        if self._gen is not None:
            self._gen.close()
        if self.finished:
            return []
        out = self.normalizer.finish()
        out.append(self._done("aborted"))
        return out

    @property
    def answer(self) -> str:
        return self.normalizer.answer

    # -- the turn --------------------------------------------------------------

    def _run(self) -> Iterator[StreamPacket]:
        try:
            info = self.catalog.show(self.request.model)
            think = self._think_setting(info)
            messages, options = self._context(info)
            self.iterations += 1
            yield from self._call_model(messages, think, options)
            yield from self.normalizer.finish()
            reason = "length" if self.normalizer.done_reason == "length" else "stop"
            yield self._done(reason)
        except LocalGPTError as exc:
            if isinstance(exc, ModelNotFound) and not exc.hint:
                exc = self.catalog.not_found(self.request.model)
            self.error = exc
            yield from self.normalizer.finish()
            yield self.factory.error(exc.code, str(exc), exc.retryable)
            yield self._done("error")

    def _think_setting(self, info: ModelInfo) -> bool | None:
        wanted = self.request.think
        if wanted is None:
            return True if info.can_think else None
        if wanted and not info.can_think:
            self.warn(
                "thinking_unsupported",
                f"{self.request.model} cannot think (no 'thinking' capability); answering without.",
            )
            return None
        return wanted

    def _context(self, info: ModelInfo) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Load the history window, store the user message, assemble within the budget."""
        request = self.request
        history: list[dict[str, Any]] = []
        if self.store is not None and self.conversation_id is not None:
            history = replay(self.store.messages(self.conversation_id, last=request.window))
        current = {"role": "user", "content": request.user_content()}
        if self.store is not None and request.save:
            if self.conversation_id is None:
                self.conversation_id = self.store.create_conversation(request.model).id
            self.store.add_message(self.conversation_id, "user", current["content"])
            self._user_stored = True
        pinned = [{"role": "system", "content": request.system}] if request.system else []
        options = dict(request.options)
        context_length = options.get("num_ctx") or info.context_length or 4096
        assembled = assemble(
            pinned, history, current, context_length=context_length, options=options,
            window=request.window,
        )
        if assembled.over_budget:
            self.warn(
                "context_overflow",
                f"the prompt (~{assembled.estimated_tokens} tokens) does not fit the "
                f"{context_length}-token context of {request.model}; the model will see it cut.",
            )
        num_ctx = needed_num_ctx(assembled.estimated_tokens, context_length, options)
        if num_ctx:
            options["num_ctx"] = num_ctx
        return assembled.messages, options

    def _call_model(
        self, messages: list[dict[str, Any]], think: bool | None, options: dict[str, Any]
    ) -> Iterator[StreamPacket]:
        request = self.request
        if request.stream:
            chunks: Iterator[Any] = self.client.chat_stream(
                request.model, messages, think=think, options=options
            )
        else:
            chunks = iter([self.client.chat(request.model, messages, think=think, options=options)])
        feed = self.normalizer.feed
        try:
            for chunk in chunks:
                packets = feed(chunk)
                if packets:
                    if self.first_token_ms is None:
                        self.first_token_ms = _ms_since(self._start)
                    yield from packets
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        self.prompt_tokens = self.normalizer.prompt_eval_count
        self.completion_tokens = self.normalizer.eval_count

    def _persist(self, reason: str, total_ms: int) -> None:
        """Store the assistant message: the answer as streamed, marked with how it ended."""
        if self.store is None or not self._user_stored or self.conversation_id is None:
            return
        metadata: dict[str, Any] = {
            "done_reason": reason,
            "model": self.request.model,
            "usage": {"prompt_tokens": self.prompt_tokens,
                      "completion_tokens": self.completion_tokens},
            "timings": {"first_token_ms": self.first_token_ms, "total_ms": total_ms},
        }
        if self.error is not None:
            metadata["error"] = {"code": self.error.code, "message": str(self.error)}
        message = self.store.add_message(
            self.conversation_id,
            "assistant",
            self.normalizer.answer,
            thinking=self.normalizer.reasoning or None,
            metadata=metadata,
        )
        self.message_id = message.id

    def _done(self, reason: str) -> StreamPacket:
        self.finished = True
        total_ms = _ms_since(self._start)
        try:
            self._persist(reason, total_ms)
        except LocalGPTError as exc:
            self.warn(exc.code, f"the answer could not be stored: {exc}")
        return self.factory.done(
            reason,
            model=self.request.model,
            conversation_id=self.conversation_id if self._user_stored else None,
            message_id=self.message_id,
            iterations=self.iterations,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms,
            total_ms=total_ms,
        )
