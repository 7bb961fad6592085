"""Chat chunks (`ChatChunk`, shaped as Ollama's: llm/provider.py) -> StreamPackets.

Models disagree about where reasoning goes: `message.thinking` on current servers,
`<think>…</think>` inside `content` on older ones and some templates. The normalizer
hides that difference: reasoning always leaves as `thought`, the answer as `token`, and
no tag text ever reaches a `token` — also when a tag is split across chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localgpt_cli.kernel.packets import PacketFactory, StreamPacket
from localgpt_cli.llm.provider import ChatChunk

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


@dataclass
class ToolCallRequest:
    """A tool call the model asked for, with the id we give it (the client drops Ollama's)."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None  # the provider could not read the arguments: why


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


@dataclass
class Normalizer:
    """Turns the chunks of one model response into packets, and remembers what it saw."""

    factory: PacketFactory
    content: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    _in_think: bool = False
    _held: str = ""
    _strip_leading: bool = False

    def feed(self, chunk: ChatChunk) -> list[StreamPacket]:
        out: list[StreamPacket] = []
        message = chunk.message
        thinking = message.thinking
        if thinking:
            self.thinking.append(thinking)
            out.append(self.factory.thought(thinking))
        text = message.content
        if text:
            if self._held or self._in_think or "<" in text:
                self._split_tags(text, out)
            else:
                self._emit_token(text, out)
        calls = message.tool_calls
        if calls:
            for call in calls:
                args = call.function.arguments
                self.tool_calls.append(
                    ToolCallRequest(call.function.name, dict(args) if args else {},
                                    getattr(call.function, "error", None))
                )
        if chunk.done:
            self.done_reason = chunk.done_reason
            self.prompt_eval_count = chunk.prompt_eval_count
            self.eval_count = chunk.eval_count
        return out

    def finish(self) -> list[StreamPacket]:
        """Flush text held back as a possible partial tag: the stream ended, it was text."""
        out: list[StreamPacket] = []
        held, self._held = self._held, ""
        if self._in_think:
            self._emit_thought(held, out)
        elif held:
            self._emit_token(held, out)
        return out

    def say(self, text: str) -> list[StreamPacket]:
        """Answer text that did not come from the model (the loop's closing sentence)."""
        out: list[StreamPacket] = []
        self._emit_token(text, out)
        return out

    @property
    def answer(self) -> str:
        return "".join(self.content)

    @property
    def reasoning(self) -> str:
        return "".join(self.thinking)

    def _emit_token(self, text: str, out: list[StreamPacket]) -> None:
        if self._strip_leading:
            text = text.lstrip()
            if not text:
                return
            self._strip_leading = False
        self.content.append(text)
        out.append(self.factory.token(text))

    def _emit_thought(self, text: str, out: list[StreamPacket]) -> None:
        if self._strip_leading:
            text = text.lstrip("\n")
            if not text:
                return
            self._strip_leading = False
        if text:
            self.thinking.append(text)
            out.append(self.factory.thought(text))

    def _split_tags(self, text: str, out: list[StreamPacket]) -> None:
        buf = self._held + text
        self._held = ""
        while buf:
            tag = CLOSE_TAG if self._in_think else OPEN_TAG
            at = buf.find(tag)
            if at >= 0:
                before, buf = buf[:at], buf[at + len(tag) :]
                if self._in_think:
                    self._emit_thought(before, out)
                    # The answer after a think block starts with the model's blank lines.
                    self._strip_leading = True
                else:
                    if before:
                        self._emit_token(before, out)
                    # Reasoning starts with the newline after the tag; it is not reasoning.
                    self._strip_leading = True
                self._in_think = not self._in_think
                continue
            keep = _partial_tag_suffix(buf, tag)
            ready, self._held = (buf[:-keep], buf[-keep:]) if keep else (buf, "")
            if self._in_think:
                self._emit_thought(ready, out)
            elif ready:
                self._emit_token(ready, out)
            break
