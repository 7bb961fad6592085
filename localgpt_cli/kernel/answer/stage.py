"""The one small interface every stage implements, the state they pass along, and the
structured model call the model-driven stages share.

A stage reads and updates `PipelineState`. When it cannot do its work (the model returned
prose, JSON that breaks the schema, a citation of a passage that does not exist, nothing,
or did not answer in time), it raises `StageFallback` with a reason; the pipeline then
calls the stage's `fallback`, which leaves the state as the stage before it left it (or
applies a deterministic substitute), and names the reason in the `sources` packet. A
stage that could change nothing this turn raises `StageSkipped` instead, before any call:
a model call on a 2-core machine costs seconds, so it is made only when it can matter.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from localgpt_cli import threads
from localgpt_cli.errors import LocalGPTError
from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.llm.provider import Cancellable, Provider

MAX_EXTRA_REQUESTS = 4  # model requests the stages may make in one turn (+1 on the re-run)
DEFAULT_STAGE_TIMEOUT = 60.0  # seconds a stage waits for its structured answer


class StageSkipped(Exception):
    """The stage had nothing to do this turn (the state is already what it would make);
    `reason` is what the `sources` packet names."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StageFallback(Exception):
    """The stage could not do its work; `reason` is what the `sources` packet names."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class PipelineState:
    """What the stages know about this turn's grounding; `payload` in pipeline.py turns it
    into the `sources` packet."""

    question: str
    previous: list[str] = field(default_factory=list)  # earlier user turns, oldest first
    query: str = ""
    intent: str | None = None
    domain: str | None = None
    mode: str = "hybrid"
    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    condensed: dict[str, Any] | None = None
    condense_fallback: str | None = None
    scope_changed: bool = False
    rerun: bool = False
    reports: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # stages that raised: bugs, shown
    budget: int | None = None  # the prompt's token budget (kernel/context.py), when known
    force_condense: bool = False  # `--condense`: condense even passages that already fit

    def ids(self) -> list[str]:
        return [p["id"] for p in self.kept]


class Stage(Protocol):
    """One step of the pipeline. `run` may raise StageFallback; `fallback` then applies
    the stage's deterministic substitute (or nothing)."""

    name: str

    def run(self, state: PipelineState) -> None: ...

    def fallback(self, state: PipelineState, reason: str) -> None: ...


@dataclass
class ModelCaller:
    """Structured calls to the chat model on behalf of the stages: `format` set to the
    stage's JSON Schema, thinking off whatever the conversation uses (a stage wants a
    verdict, not an essay), temperature 0, at most `budget` requests per turn."""

    client: Provider
    model: str
    can_think: bool = False
    timeout: float = DEFAULT_STAGE_TIMEOUT
    budget: int = MAX_EXTRA_REQUESTS
    requests: int = 0

    def ask(self, system: str, user: str, schema: dict[str, Any],
            check: dict[str, Any] | None = None, *, cap: int) -> Any:  # fmt: skip
        """The model's answer as validated JSON, or StageFallback naming what went wrong.
        `schema` is sent; `check` (default: the same) is what the answer must meet. `cap`
        is the most tokens the answer may take: what the schema needs with room to spare,
        so a small model rambling inside the grammar is cut off (then `invalid_json`)
        instead of generating until its context is full."""
        if self.requests >= self.budget:
            raise StageFallback("budget", f"{self.budget} stage requests already made")
        self.requests += 1
        content = self._content(
            [{"role": "system", "content": system}, {"role": "user", "content": user}], schema,
            cap,
        )
        if not content.strip():
            raise StageFallback("empty", "the model returned nothing")
        try:
            value = json.loads(content)
        except ValueError:
            reason = "invalid_json" if content.lstrip()[:1] in ("{", "[") else "not_json"
            raise StageFallback(reason, content[:80]) from None
        found = schemas.problem(value, check or schema)
        if found:
            raise StageFallback("schema", found)
        return value

    def _content(self, messages: Sequence[dict[str, Any]], schema: dict[str, Any],
                 cap: int) -> str:  # fmt: skip
        """The answer's text, waited for at most `timeout` seconds. The request runs on a
        daemon thread so a stalled server costs this stage its answer, not the turn. A
        model in this process (Cancellable) is stopped at its next token and waited for:
        the next call must not run on it while this one still does."""
        stop = threading.Event()
        cancellable = isinstance(self.client, Cancellable)

        def call() -> str:
            if isinstance(self.client, Cancellable):
                self.client.cancel_on(stop)
            reply = self.client.chat(
                self.model, messages, think=False if self.can_think else None,
                options={"temperature": 0, "num_predict": cap}, format=schema,
            )  # fmt: skip
            return reply.message.content or ""

        start = time.perf_counter()
        answer = threads.start(call, "localgpt-stage")
        if not wait([answer], timeout=self.timeout).done:
            waited = time.perf_counter() - start
            if cancellable:
                stop.set()
                wait([answer])
            raise StageFallback("timeout", f"no answer in {waited:.1f} s")
        try:
            return str(answer.result())  # a bug (not a LocalGPTError) is raised here
        except LocalGPTError as exc:
            raise StageFallback("model_error", str(exc)) from None


def passages_text(kept: Sequence[dict[str, Any]], limit: int = 1200) -> str:
    """The kept passages as the stages show them to the model: `[P1] path (chunk 3)`
    and the text, each cut to `limit` characters so one batched call stays small."""
    parts = []
    for p in kept:
        text = " ".join(str(p.get("text", "")).split())
        parts.append(f"[{p['id']}] {p['path']} (chunk {p['chunk']})\n{text[:limit]}")
    return "\n\n".join(parts)
