"""The agent loop: call the model, run the tools it asks for, feed results back.

The model decides when it is done (a response without tool calls). The loop only
guards the edges: an iteration cap, a call repeated three times in a row, and tool
failures — an unknown name, arguments that do not fit the schema, a tool that raises —
which become a `tool_result` with `ok: false` that the model reads and can recover
from. Nothing a tool does ends the user's turn with a traceback.

When a guard stops the loop the model has not answered, so the loop answers for it: one
sentence saying which guard and which tool, streamed as `token`s and stored as the
answer, so a user reading stdout or the history is never left with an empty answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import UnsupportedCapability
from localgpt_cli.images import Picture
from localgpt_cli.kernel import pictures
from localgpt_cli.kernel.normalize import Normalizer, ToolCallRequest
from localgpt_cli.kernel.packets import PacketFactory, StreamPacket
from localgpt_cli.kernel.strategy import Warn
from localgpt_cli.llm.provider import Provider

if TYPE_CHECKING:
    from localgpt_cli.tools.base import Tool

DEFAULT_MAX_ITERATIONS = 10
REPEAT_LIMIT = 3

Approve = Callable[[str, dict[str, Any]], bool]
ApproveNetwork = Callable[[str, dict[str, Any]], "bool | None"]  # None: no terminal to ask
OnMessage = Callable[[dict[str, Any]], None]


@dataclass
class LoopState:
    """What the loop has produced so far; the turn reads it for `done` and the history."""

    iterations: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_packet_at: float | None = None
    reason: str = "stop"
    normalizer: Normalizer | None = None
    used_tools: list[str] = field(default_factory=list)  # tools that ran, in order, once each
    previews: list[dict[str, Any]] = field(default_factory=list)  # shown to the user, in order
    read_local: bool = False  # local files are in the context: a network tool must ask


def holds_local_data(messages: list[dict[str, Any]], tools: Sequence[Tool], attached: bool) -> bool:
    """Whether a turn starts with local file content in its context: `attached` (--file,
    retrieved passages), or the result of a tool that reads local files in an earlier
    turn that conversation memory sends again (the way out must not wait one turn)."""
    local = {t.name for t in tools if t.reads_local}
    return attached or any(m.get("role") == "tool" and m.get("tool_name") in local
                           for m in messages)


def _add(total: int | None, part: int | None) -> int | None:
    if part is None:
        return total
    return part if total is None else total + part


class AgentLoop:
    """Runs iterations until the model answers without tool calls, or a guard stops it."""

    def __init__(
        self,
        client: Provider,
        model: str,
        factory: PacketFactory,
        *,
        tools: Sequence[Tool] = (),
        enabled: Sequence[Tool] = (),
        think: bool | None = None,
        options: dict[str, Any] | None = None,
        stream: bool = True,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        approve: Approve | None = None,
        approve_network: ApproveNetwork | None = None,
        read_local: bool = False,
        on_message: OnMessage | None = None,
        warn: Warn | None = None,
        vision: bool = False,
    ) -> None:
        self.client = client
        self.model = model
        self.factory = factory
        self.tools = {t.name: t for t in tools}  # offered to the model
        # Any enabled tool may run, also one the selection did not offer this turn.
        self.enabled = {t.name: t for t in enabled} | self.tools
        self.think = think
        self.options = options or {}
        self.stream = stream
        self.max_iterations = max_iterations
        self.approve = approve
        self.approve_network = approve_network
        self.on_message = on_message or (lambda message: None)
        self.warn = warn or (lambda code, message: None)
        self.state = LoopState(read_local=read_local)
        self.vision = vision  # pictures a tool returns are shown to the model
        self._seen: list[Picture] = []  # ... on the request after this iteration's tools
        self._call_seq = 0
        self._last_signature: str | None = None
        self._repeats = 0
        self._spoke = False  # some answer text was streamed before the tool calls
        self.format: str | dict[str, Any] | None = None  # structured output (kernel/structured.py)

    def run(self, messages: list[dict[str, Any]]) -> Iterator[StreamPacket]:
        state = self.state
        while state.iterations < self.max_iterations:
            state.iterations += 1
            normalizer = state.normalizer = Normalizer(self.factory)
            yield from self._call_model(messages, normalizer)
            yield from normalizer.finish()
            state.prompt_tokens = _add(state.prompt_tokens, normalizer.prompt_eval_count)
            state.completion_tokens = _add(state.completion_tokens, normalizer.eval_count)
            self._spoke = self._spoke or bool(normalizer.answer.strip())
            if not normalizer.tool_calls:
                state.reason = normalizer.done_reason if normalizer.done_reason in (
                    "length", "content_filter") else "stop"
                return
            assistant = {
                "role": "assistant",
                "content": normalizer.answer,
                "thinking": normalizer.reasoning or None,
                "tool_calls": [
                    {"function": {"name": c.name, "arguments": c.arguments}}
                    for c in normalizer.tool_calls
                ],
            }
            self.on_message(assistant)
            messages.append({k: v for k, v in assistant.items() if k != "thinking"})
            for call in normalizer.tool_calls:
                yield from self._run_tool(call, messages)
                if self._repeats >= REPEAT_LIMIT:
                    yield from self._stop("loop_guard", (
                        f"the model called {call.name} with the same arguments "
                        f"{REPEAT_LIMIT} times in a row."
                    ))
                    return
            if self._seen:
                messages.append(pictures.follow_up(self._seen))
                self._seen = []
        last = normalizer.tool_calls[-1].name
        yield from self._stop("max_iterations", (
            f"the model was still calling tools (last {last}) after {self.max_iterations} "
            "model calls; --max-iterations allows more."
        ))

    def _stop(self, reason: str, why: str) -> Iterator[StreamPacket]:
        """End the turn with `reason`, answering with one sentence that says why."""
        if self._spoke:  # a paragraph of its own after what the model said (not stored)
            yield self.factory.token("\n\n")
        self.state.reason = reason
        self.state.normalizer = Normalizer(self.factory)
        yield from self.state.normalizer.say(f"Stopped without an answer: {why}")

    # -- one model call --------------------------------------------------------

    def _call_model(
        self, messages: list[dict[str, Any]], normalizer: Normalizer
    ) -> Iterator[StreamPacket]:
        definitions = [t.to_ollama() for t in self.tools.values()]
        try:
            yield from self._stream(messages, normalizer, definitions)
        except UnsupportedCapability as exc:
            if exc.code != "tools_unsupported" or not definitions:
                raise
            # The server knows better than /api/show: once more, without tools.
            self.warn("tools_unsupported", f"{self.model} refused tools; answering without them.")
            self.tools, self.enabled = {}, {}
            yield from self._stream(messages, normalizer, [])

    def _stream(
        self,
        messages: list[dict[str, Any]],
        normalizer: Normalizer,
        definitions: list[dict[str, Any]],
    ) -> Iterator[StreamPacket]:
        if self.format is not None:  # one JSON document: nothing to show before it ends
            chunks: Iterator[Any] = iter([self.client.chat(
                self.model, messages, think=self.think, options=self.options,
                format=self.format)])
        elif self.stream:
            chunks = self.client.chat_stream(
                self.model, messages, tools=definitions, think=self.think, options=self.options
            )
        else:
            chunks = iter([self.client.chat(self.model, messages, tools=definitions,
                                            think=self.think, options=self.options)])
        feed = normalizer.feed
        try:
            for chunk in chunks:
                packets = feed(chunk)
                if packets:
                    if self.state.first_packet_at is None:
                        self.state.first_packet_at = time.perf_counter()
                    yield from packets
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    # -- one tool call ---------------------------------------------------------

    def _run_tool(
        self, call: ToolCallRequest, messages: list[dict[str, Any]]
    ) -> Iterator[StreamPacket]:
        self._call_seq += 1
        call_id = f"call_{self.state.iterations}_{self._call_seq}"
        signature = f"{call.name}:{json.dumps(call.arguments, sort_keys=True, default=str)}"
        self._repeats = self._repeats + 1 if signature == self._last_signature else 1
        self._last_signature = signature
        yield self.factory.make("tool_start", {
            "call_id": call_id, "name": call.name, "arguments": call.arguments,
            "iteration": self.state.iterations,
        })
        start = time.perf_counter()
        seen = len(self._seen)
        result, ok, preview = self._outcome(call)
        duration_ms = int((time.perf_counter() - start) * 1000)
        payload = {"call_id": call_id, "name": call.name, "ok": ok, "result": result,
                   "duration_ms": duration_ms}
        if preview is not None:
            payload["preview"] = preview
        yield self.factory.make("tool_result", payload)
        message = {"role": "tool", "tool_name": call.name, "content": result}
        messages.append(message)
        self.on_message({**message, "tool_call_id": call_id, "ok": ok, "preview": preview,
                         "images": [p.ref() for p in self._seen[seen:]]})

    def _outcome(self, call: ToolCallRequest) -> tuple[str, bool, dict[str, Any] | None]:
        """(result for the model, ok, the preview shown to the user or None)."""
        from localgpt_cli.tools.base import ToolError, text_of
        from localgpt_cli.tools.picture_read import PictureRead

        tool = self.enabled.get(call.name)
        if call.error is not None:
            return (f"Error: the call to {call.name} could not be run: {call.error}. "
                    "Call it again with a JSON object of arguments."), False, None
        if tool is None:
            available = ", ".join(self.enabled) or "none"
            return (f"Error: there is no tool named {call.name!r}. "
                    f"Available tools: {available}."), False, None
        if tool.network and self.state.read_local:
            refused = self._way_out(call)
            if refused:
                return refused, False, None
        # A preview acts on nothing, so there is nothing to approve.
        elif not tool.preview and self.approve is not None and not self.approve(
            call.name, call.arguments
        ):
            return "Error: the user declined to run this tool call.", False, None
        if call.name not in self.state.used_tools:
            self.state.used_tools.append(call.name)
        try:
            if tool.preview:
                return self._preview(tool, call.arguments)
            printed, value = tool.call(call.arguments)
            if isinstance(value, PictureRead):  # read_file on an image: seen, or its OCR text
                self._seen.extend([value.picture] if self.vision else [])
                value = pictures.tool_result(value, self.vision)
            result = text_of(printed, value)
        except ToolError as exc:
            return f"Error: {exc}", False, None
        self.state.read_local = self.state.read_local or tool.reads_local
        return result, True, None

    def _way_out(self, call: ToolCallRequest) -> str | None:
        """Private data, untrusted text and a way out in one turn: once local files were
        read, a tool that sends data off the machine runs only if the user says yes on a
        terminal. The refusal the model reads, or None when the user approved."""
        asked = self.approve_network(call.name, call.arguments) if self.approve_network else None
        if asked:
            return None
        if asked is None:
            return (f"Error: {call.name} sends data off this machine and this turn has read "
                    "local files, so it needs the user's approval on a terminal, and there "
                    "is none to ask on. It was not run.")
        return (f"Error: the user declined to let {call.name} send data off this machine "
                "after this turn read local files. It was not run.")

    def _preview(
        self, tool: Tool, arguments: dict[str, Any]
    ) -> tuple[str, bool, dict[str, Any]]:
        """Preview interception: the tool's Preview goes to the user, the model is told
        only `preview_sent` and the id, and nothing is run or written."""
        from localgpt_cli.tools.preview import check_preview, new_preview_id

        preview = check_preview(tool.call(arguments)[1], tool.name)
        preview.id = new_preview_id()
        payload = preview.payload()
        self.state.previews.append(payload)
        # `localgpt apply` applies an edit and refuses a command: say only what is true
        what = {"command": "command; it was not run (only the user can run it)",
                "edit": f"edit; the file is unchanged (localgpt apply {preview.id} applies "
                        "it; the user decides)"}  # fmt: skip
        return (f"preview_sent: id {preview.id}. The user was shown the proposed "
                f"{what.get(preview.kind, preview.kind)}."), True, payload
