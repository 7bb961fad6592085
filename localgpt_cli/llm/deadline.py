"""How long a model server may take: to its first token, and between two tokens.

An HTTP client's read timeout bounds one socket read, not an answer: a server that sends
an SSE comment (or an empty NDJSON chunk) every 3 s never trips a 5 s read timeout, and
one that accepts the connection and never answers waits as long as the client does. So
the answer is read on a worker thread (threads.py) and the caller waits with a clock that
counts only tokens: `first` seconds to the first one (or to a whole reply, for requests
that do not stream), then `idle` seconds from each token to the next. When the clock
runs out the caller gets `Expired` at once; the worker, a daemon thread still blocked in
its read, ends at the client's own read timeout, `Limits.backstop`, or with the process,
so no thread waits for ever either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from localgpt_cli import threads
from localgpt_cli.errors import OllamaTimeout

T = TypeVar("T")

# Defaults when neither --timeout nor the config sets them (README "Timeouts"): loading
# a large model from disk and reading a long prompt on a CPU can take minutes (Ollama's
# own load limit is 5 min); once tokens flow, two minutes of silence is a stalled server.
DEFAULT_FIRST_TOKEN = 600.0
DEFAULT_IDLE = 120.0


@dataclass(frozen=True)
class Limits:
    """Seconds to the first token (and to a whole reply) and between two tokens."""

    first: float = DEFAULT_FIRST_TOKEN
    idle: float = DEFAULT_IDLE

    @classmethod
    def of(cls, timeout: float | None, idle: float | None = None) -> Limits:
        """The limits a profile runs with: a setting when given, else the default."""
        return cls(timeout or DEFAULT_FIRST_TOKEN, idle or DEFAULT_IDLE)

    @property
    def backstop(self) -> float:
        """The HTTP client's own per-read timeout: longer than either limit, so it never
        decides first, yet it ends a worker whose socket could not be woken."""
        return max(self.first, self.idle) + 5.0


class Expired(Exception):
    """The clock ran out: `started` says whether any token had come, `limit` which one."""

    def __init__(self, started: bool, limit: float) -> None:
        super().__init__(f"no {'further ' if started else ''}token within {limit:g} s")
        self.started = started
        self.limit = limit

    def error(self, where: str) -> OllamaTimeout:
        """The one line for the user: which limit ran out, and which knob moves it."""
        if self.started:
            return OllamaTimeout(f"{where} stopped answering: no token for {self.limit:g} s.",
                                 hint="Raise idle_timeout in config.toml; the partial answer "
                                      "was kept.")  # fmt: skip
        return OllamaTimeout(f"{where} sent no answer within {self.limit:g} s.",
                             hint="Raise --timeout (seconds to the first token).")


def paced(items: Iterator[T], limits: Limits, is_token: Callable[[T], bool]) -> Iterator[T]:
    """`items`, read on a worker thread, each passed on as it comes; `Expired` when no
    token (an item for which `is_token` holds) came within the limit. Items that are not
    tokens (keep-alives, role-only deltas) pass through but do not reset the clock."""
    return threads.paced(items, limits.first, limits.idle, Expired, is_token=is_token,
                         name="localgpt-answer-reader")  # fmt: skip


def within(call: Callable[[], T], limits: Limits) -> T:
    """`call()`'s result, waited for at most `limits.first` seconds (a whole reply)."""
    return threads.within(call, limits.first, Expired, "localgpt-answer-reader")
