"""One turn of a conversation: context -> model -> packets, ending in exactly one `done`.

A `Turn` is an iterator of packets with an `abort()` for Ctrl-C: whichever side the
interrupt lands on (inside the model stream or in the renderer), the caller gets the
`done` packet with reason `aborted`, the HTTP stream is closed, and what was produced
is stored. The user message is stored before the model is called and the answer when
the turn ends, however it ends: nothing the user typed or saw is lost.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, LocalGPTError, ModelNotFound
from localgpt_cli.kernel import pictures, strategy
from localgpt_cli.kernel.answer.ground import ground, previous_turns
from localgpt_cli.kernel.answer.pipeline import AnswerOptions, payload
from localgpt_cli.kernel.answer.prompt import fit_passages, grounded, pinned_blocks
from localgpt_cli.kernel.context import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    SERVER_DEFAULT_CTX,
    assemble,
    cut_middle,
    estimate_tokens,
    message_tokens,
    needed_num_ctx,
    prompt_budget,
)
from localgpt_cli.kernel.facts import blame, send_facts
from localgpt_cli.kernel.grounding import Retriever, files_block
from localgpt_cli.kernel.loop import AgentLoop, holds_local_data
from localgpt_cli.kernel.memory import episodes, recall
from localgpt_cli.kernel.normalize import Normalizer
from localgpt_cli.kernel.packets import PacketFactory, StreamPacket
from localgpt_cli.kernel.request import Toolbox, TurnRequest
from localgpt_cli.kernel.strategy import Warn
from localgpt_cli.llm.catalog import ModelCatalog
from localgpt_cli.llm.provider import ModelInfo, Provider

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.history.types import Message
    from localgpt_cli.kernel.answer.stage import PipelineState
    from localgpt_cli.tools.base import Tool
    from localgpt_cli.tools.selection import Selection

# Less room than this for piped text and cutting it is pointless: the question is refused.
MIN_PIPED_TOKENS = 256


def _ms_since(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


class Turn:
    """Iterate for packets; call `abort()` after an interrupt for the closing packets."""

    def __init__(
        self,
        client: Provider,
        catalog: ModelCatalog,
        request: TurnRequest,
        *,
        store: Store | None = None,
        toolbox: Toolbox | None = None,
        retriever: Retriever | None = None,
        warn: Warn | None = None,
        factory: PacketFactory | None = None,
    ) -> None:
        self.client = client
        self.catalog = catalog
        self.request = request
        self.store = store
        self.toolbox = toolbox
        self.retriever = retriever
        self.grounding: PipelineState | None = None
        self.memory: dict[str, Any] | None = None  # the `memory` packet's payload
        self.factory = factory or PacketFactory()
        self.warn = warn or (lambda code, message: None)
        self.error: LocalGPTError | None = None
        self.finished = False
        self.conversation_id = request.conversation_id
        self.message_id: str | None = None
        self.question_id: str | None = None  # the stored question: what the answer replies to
        self.store_error: LocalGPTError | None = None  # the answer could not be stored
        self.loop: AgentLoop | None = None
        self.user_content = request.user_content()  # as sent, once fitted to the context
        self.cuts: list[dict[str, Any]] = []  # what was cut to fit, for `done` and history
        self.selection: Selection | None = None  # how the offered tools were chosen
        self._user_stored = False
        self._start = time.perf_counter()
        self._gen: Generator[StreamPacket, None, None] | None = None

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
        out = self.normalizer.finish() if self.normalizer else []
        out.extend(self._done("aborted"))
        return out

    @property
    def normalizer(self) -> Normalizer | None:
        """The current model call's normalizer (None before the first call)."""
        return self.loop.state.normalizer if self.loop else None

    # -- the turn --------------------------------------------------------------

    def _run(self) -> Generator[StreamPacket, None, None]:
        request = self.request
        try:
            info = self.catalog.show(request.model)
            plan = strategy.choose(
                info, think=request.think, want_tools=bool(self.toolbox and self.toolbox.tools),
                warn=self.warn, retrieving=self.retriever is not None,
            )
            failures = self._retrieve(info)
            messages, options = self._context(info)
            if self.grounding is not None:
                yield self.factory.make("sources", self._sources())
            for failure in failures:  # a stage's bug: shown, and the answer goes on
                yield self.factory.error("stage_error", failure, False)
            if self.memory is not None:
                yield self.factory.make("memory", self.memory)
            offered, enabled = self._tools(plan.use_tools)
            self.loop = self._loop_class()(
                self.client, request.model, self.factory, tools=offered, enabled=enabled,
                think=plan.think, options=options, stream=request.stream,
                max_iterations=request.max_iterations,
                approve=self.toolbox.approve if self.toolbox else None,
                approve_network=self.toolbox.approve_network if self.toolbox else None,
                read_local=holds_local_data(messages, enabled, bool(request.files or (
                    self.grounding and self.grounding.kept))),
                on_message=self._store_step, warn=self.warn,
                vision="vision" in info.capabilities,
            )
            yield from self.loop.run(messages)
            yield from self._done(self.loop.state.reason)
        except LocalGPTError as exc:
            if isinstance(exc, ModelNotFound) and not exc.hint:
                exc = self.catalog.not_found(request.model)
            self.error = exc
            if self.normalizer:
                yield from self.normalizer.finish()
            yield self.factory.error(exc.code, str(exc), exc.retryable)
            yield from self._done("error")

    def _loop_class(self) -> Any:
        """The agent loop, or with `--schema` the one whose answer is validated JSON."""
        spec = self.request.structured
        if spec is None:
            return AgentLoop
        from functools import partial

        from localgpt_cli.kernel.structured import StructuredLoop

        return partial(StructuredLoop, spec=spec)

    def _retrieve(self, info: ModelInfo) -> list[str]:
        """Ground the question (kernel/answer/): a retrieval failure costs only the sources;
        returns the stages that raised, for `error` packets."""
        if self.retriever is None:
            return []
        request = self.request
        question = request.prompt or (request.stdin_text or "")
        previous = previous_turns(self.store, self.conversation_id)
        context_length = request.options.get("num_ctx") or info.context_length
        budget = prompt_budget(context_length or SERVER_DEFAULT_CTX, request.options)
        try:
            self.grounding = ground(self.client, request.model, info, self.retriever,
                                    question, previous, request.answer or AnswerOptions(),
                                    self.warn, budget)  # fmt: skip
        except LocalGPTError as exc:
            self.warn(exc.code, f"retrieval failed, answering without sources: {exc}")
            return []
        return self.grounding.failures

    def _sources(self) -> dict[str, Any]:
        assert self.grounding is not None
        options = self.request.answer or AnswerOptions()
        mode = "fast" if options.pipeline == "fast" else "full"
        return payload(self.grounding, mode, options.condense)

    def _tools(self, use_tools: bool) -> tuple[list[Tool], list[Tool]]:
        """(offered, enabled): the selection among many tools, or all of them."""
        if not use_tools or self.toolbox is None:
            return [], []
        enabled = self.toolbox.tools
        if self.toolbox.select is None:
            return enabled, enabled
        selection = self.selection = self.toolbox.select(enabled, self.user_content)
        if selection.warning:
            self.warn("tool_selection", selection.warning)
        # `--tools GROUPS`: a tool outside the allowed groups may not run either
        return selection.tools, enabled if selection.groups is None else selection.allowed

    def _context(self, info: ModelInfo) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Fit the user message to the budget, store it, assemble with the history window."""
        request = self.request
        options = dict(request.options)
        context_length = options.get("num_ctx") or info.context_length or SERVER_DEFAULT_CTX
        budget = prompt_budget(context_length, options)
        attached = files_block(request.files, budget, self.warn, self.cuts)
        if self.grounding is not None:
            fit_passages(self.grounding, request.files, budget)
        self.facts = send_facts(request.project_memory, budget, request.memory.project_share,
                                context_length, request.model, self.warn)
        pinned = pinned_blocks(request.system, self.facts.texts, attached, self.grounding)
        pinned_tokens = sum(message_tokens(m) for m in pinned)
        seen_tokens = IMAGE_TOKENS * len(request.images)  # pictures travel with the question
        self.user_content = self._fit_user_content(budget - pinned_tokens - seen_tokens,
                                                   context_length)
        stored: list[Message] = []
        if self.store is not None and self.conversation_id is not None:
            stored = self.store.messages(self.conversation_id)
        current = {"role": "user", "content": self.user_content}
        seen = pictures.attach(current, request.images)  # history keeps their hashes
        if self.store is not None:  # --no-save: the store is this process's memory
            if self.conversation_id is None:  # with its first question, or not at all
                question = self.store.start_conversation(request.model, current["content"],
                                                         metadata=seen)
                self.conversation_id = question.conversation_id
            else:
                question = self.store.add_message(self.conversation_id, "user",
                                                  current["content"], metadata=seen)
            self.question_id, self._user_stored = question.id, True
            pictures.keep(self.store, question.id, request.images, request.keep_images)
        history = self._recall(stored, budget - pinned_tokens - message_tokens(current))
        assembled = assemble(
            pinned, history, current, context_length=context_length, options=options,
            window=len(history),
        )
        num_ctx = needed_num_ctx(assembled.estimated_tokens, context_length, options)
        if num_ctx:
            options["num_ctx"] = num_ctx
        return assembled.messages, options

    def _recall(self, stored: list[Message], budget: int) -> list[dict[str, Any]]:
        """The earlier turns worth sending (kernel/memory.py); the report is the `memory`
        packet, sent when the conversation has earlier turns."""
        if not stored:
            return []
        request = self.request
        files = [(f.path, f.text) for f in request.files]
        question = request.prompt or (request.stdin_text or "")
        recalled = recall(episodes(stored), question, budget, request.memory,
                          files=files, max_messages=request.window)
        self.memory = recalled.report
        return recalled.messages

    def _fit_user_content(self, room: int, context_length: int) -> str:
        """The user message within `room` estimated tokens (what the budget leaves after
        the system prompt, files and sources), or InvalidInput.

        The question is kept whole. Piped text that does not fit is cut in the middle
        with a marker, as --file is: sent whole, Ollama would keep only its end (and
        megabytes would cross the wire for nothing). A question that cannot fit even
        so is refused rather than sent to be cut blindly.
        """
        request = self.request
        piped = request.stdin_text or ""
        piped_tokens = estimate_tokens(piped)
        # The blank line between the piped text and the question is one more token.
        question_tokens = MESSAGE_OVERHEAD + estimate_tokens(request.prompt) + 1
        if piped_tokens + question_tokens <= room:
            return self.user_content
        piped_room = room - question_tokens
        model = request.model
        if piped and piped_room >= MIN_PIPED_TOKENS:
            text, cut = cut_middle(piped, piped_room, piped_tokens)
            self.cuts.append({"source": "stdin", "chars": len(piped), "cut_chars": cut})
            self.warn(
                "stdin_truncated",
                f"stdin ({len(piped):,} characters, ~{piped_tokens:,} tokens) does not fit "
                f"the {context_length:,}-token context of {model}; sending its head and tail, "
                f"{cut:,} characters cut from the middle.",
            )
            return request.user_content(text)
        memory, memory_hint = blame(self.facts, question_tokens, room)
        raise InvalidInput(
            f"the message does not fit the {context_length:,}-token context of {model}: "
            f"the question needs ~{question_tokens:,} tokens and ~{max(room, 0):,} are left "
            f"for it (after the system prompt, {memory}files and sources, and room for the "
            "answer); nothing was sent.",
            hint=memory_hint or "Shorten the question (piped text is cut to fit instead), "
            "or raise -o num_ctx if the model allows more.",
        )

    def _store_step(self, message: dict[str, Any]) -> None:
        """Store an intermediate message of the loop: a tool call or a tool result."""
        if self.store is None or not self._user_stored or self.conversation_id is None:
            return
        if message["role"] == "tool":
            self.store.add_message(
                self.conversation_id, "tool", message["content"],
                tool_name=message["tool_name"], tool_call_id=message["tool_call_id"],
                reply_to=self.question_id, metadata={"ok": message["ok"]} | (
                    {"preview": message["preview"]} if message.get("preview") else {}) | (
                    {"images": message["images"]} if message.get("images") else {}),
            )
        else:
            self.store.add_message(
                self.conversation_id, "assistant", message["content"],
                thinking=message.get("thinking"), tool_calls=message["tool_calls"],
                reply_to=self.question_id, metadata={
                    "model": self.request.model, "provider": self.request.provider,
                    "step": "tool_calls"},
            )

    def _persist(self, reason: str, timings: dict[str, int | None]) -> None:
        """Store the final assistant message: the answer as streamed, marked with its end."""
        if self.store is None or not self._user_stored or self.conversation_id is None:
            return
        state = self.loop.state if self.loop else None
        metadata: dict[str, Any] = {
            "done_reason": reason,
            "model": self.request.model,
            "provider": self.request.provider,
            "usage": {"prompt_tokens": state.prompt_tokens if state else None,
                      "completion_tokens": state.completion_tokens if state else None},
            "timings": timings,
            "used_tools": state.used_tools if state else [],
        }
        if self.grounding is not None:
            metadata["sources"] = [
                {k: r.get(k) for k in ("rank", "score", "document_id", "path", "chunk", "page")}
                for r in self.grounding.kept
            ]
        if self.cuts:
            metadata["cut"] = self.cuts
        if state and state.previews:
            metadata["previews"] = state.previews
        if self.error is not None:
            metadata["error"] = {"code": self.error.code, "message": str(self.error)}
        spec = self.request.structured
        if spec is not None:  # --schema: each raw answer and what was wrong with it
            metadata["structured"] = {"schema": spec.schema,
                                      "attempts": getattr(self.loop, "attempts", [])}
        normalizer = self.normalizer
        message = self.store.add_message(
            self.conversation_id,
            "assistant",
            normalizer.answer if normalizer else "",
            thinking=(normalizer.reasoning or None) if normalizer else None,
            metadata=metadata,
            reply_to=self.question_id,
        )
        self.message_id = message.id

    def _done(self, reason: str) -> list[StreamPacket]:
        """The turn stored, then `done`; an answer that could not be stored is also an
        `error` packet before it, as every error a command exits with is in --json."""
        self.finished = True
        state = self.loop.state if self.loop else None
        first = state.first_packet_at if state else None
        timings = {
            "first_token_ms": int((first - self._start) * 1000) if first else None,
            "total_ms": _ms_since(self._start),
        }
        try:
            self._persist(reason, timings)
        except LocalGPTError as exc:  # the store already tried again (postgres.py)
            self.store_error, self.error = exc, self.error or exc  # said in `done`, exit code
        failed = self.store_error
        owed = [] if failed is None else [self.factory.error(
            failed.code, f"the answer was not stored: {failed}", failed.retryable)]
        return [*owed, self.factory.done(
            reason,
            model=self.request.model,
            provider=self.request.provider,
            conversation_id=self.conversation_id if self._user_stored else None,
            message_id=self.message_id,
            iterations=state.iterations if state else 0,
            prompt_tokens=state.prompt_tokens if state else None,
            completion_tokens=state.completion_tokens if state else None,
            first_token_ms=timings["first_token_ms"],
            total_ms=timings["total_ms"],
            used_tools=state.used_tools if state else [],
            cut=self.cuts,
            selection=self.selection.report() if self.selection else None,
            grounded=grounded(self.grounding),
            files=self.toolbox.files if self.toolbox else None,
            store_error=self.store_error.to_payload() if self.store_error else None,
            structured=getattr(self.loop, "value", None) if self.request.structured else None,
        )]
