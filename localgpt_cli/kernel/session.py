"""One turn of a conversation: context -> model -> packets, ending in exactly one `done`.

A `Turn` is an iterator of packets with an `abort()` for Ctrl-C: whichever side the
interrupt lands on (inside the model stream or in the renderer), the caller gets the
`done` packet with reason `aborted`, the HTTP stream is closed, and what was produced
is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from localgpt_cli.errors import LocalGPTError, ModelNotFound
from localgpt_cli.kernel.normalize import Normalizer
from localgpt_cli.kernel.packets import PacketFactory, StreamPacket
from localgpt_cli.llm.catalog import ModelCatalog
from localgpt_cli.llm.client import ModelInfo, OllamaClient

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

    def user_content(self) -> str:
        """The prompt with piped text attached ahead of it (the instruction reads last)."""
        if self.stdin_text and self.prompt:
            return f"{self.stdin_text.rstrip()}\n\n{self.prompt}"
        return self.prompt or (self.stdin_text or "")


def _ms_since(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


class Turn:
    """Iterate for packets; call `abort()` after an interrupt for the closing packets."""

    def __init__(
        self,
        client: OllamaClient,
        catalog: ModelCatalog,
        request: TurnRequest,
        *,
        history: list[dict[str, Any]] | None = None,
        warn: Warn | None = None,
        factory: PacketFactory | None = None,
    ) -> None:
        self.client = client
        self.catalog = catalog
        self.request = request
        self.history = history or []
        self.factory = factory or PacketFactory()
        self.warn = warn or (lambda code, message: None)
        self.error: LocalGPTError | None = None
        self.finished = False
        self.iterations = 0
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.first_token_ms: int | None = None
        self.normalizer = Normalizer(self.factory)
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
            messages = self._messages()
            self.iterations += 1
            yield from self._call_model(messages, think)
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

    def _messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.request.system:
            messages.append({"role": "system", "content": self.request.system})
        messages.extend(self.history)
        messages.append({"role": "user", "content": self.request.user_content()})
        return messages

    def _call_model(
        self, messages: list[dict[str, Any]], think: bool | None
    ) -> Iterator[StreamPacket]:
        request = self.request
        if request.stream:
            chunks: Iterator[Any] = self.client.chat_stream(
                request.model, messages, think=think, options=request.options
            )
        else:
            chunks = iter(
                [self.client.chat(request.model, messages, think=think, options=request.options)]
            )
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

    def _done(self, reason: str) -> StreamPacket:
        self.finished = True
        return self.factory.done(
            reason,
            model=self.request.model,
            iterations=self.iterations,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms,
            total_ms=_ms_since(self._start),
        )
