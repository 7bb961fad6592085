"""What a model can do (from /api/show capabilities) -> how a turn calls it.

Decided before the first request so that a model without tools or thinking gets a
request it accepts, instead of a 400 and a retry; the retry path in the loop remains
for servers whose capabilities list is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from localgpt_cli.llm.provider import ModelInfo

Warn = Callable[[str, str], None]


@dataclass(frozen=True)
class Strategy:
    """How to call the model for one turn."""

    think: bool | None  # None: leave `think` out of the request
    use_tools: bool


def choose(info: ModelInfo, *, think: bool | None, want_tools: bool, warn: Warn,
           retrieving: bool = False) -> Strategy:  # fmt: skip
    """Think when asked (or, by default, when the model can); tools only if it can. The
    warning mentions retrieved documents only when the turn retrieves (not --no-rag)."""
    if think is None:
        think_setting: bool | None = True if info.can_think else None
    elif think and not info.can_think:
        warn(
            "thinking_unsupported",
            f"{info.name} cannot think (no 'thinking' capability); answering without.",
        )
        think_setting = None
    else:
        think_setting = think
    use_tools = want_tools and info.can_use_tools
    if want_tools and not info.can_use_tools:
        warn(
            "tools_unsupported",
            f"{info.name} cannot call tools; answering without them"
            + (" (retrieved documents still reach it)." if retrieving else "."),
        )
    return Strategy(think=think_setting, use_tools=use_tools)
