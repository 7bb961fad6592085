"""Agent-loop overhead per iteration, model time excluded.

Run: python -m tests.bench.loop [--iterations 200] [--runs 5]
A scripted client answers each model call instantly with one calculator call (and the
last with text), so what is timed is the loop itself: normalizing the chunks, making
packets, validating arguments, running the tool, building the next request. Target:
<= 5 ms per iteration.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from typing import Any

from ollama import ChatResponse, Message

from localgpt_cli.kernel.loop import AgentLoop
from localgpt_cli.kernel.packets import PacketFactory
from localgpt_cli.tools.calculator import calculator_tool


class InstantModel:
    """Answers /api/chat from memory: a tool call per call until the last one."""

    def __init__(self, calls: int) -> None:
        self.left = calls

    def chat_stream(self, model: str, messages: list[dict[str, Any]], **_: Any) -> Iterator[Any]:
        self.left -= 1
        if self.left > 0:
            call = Message.ToolCall(function=Message.ToolCall.Function(
                name="calculator", arguments={"expression": f"{self.left} * 3 + 1"}))
            yield ChatResponse(model=model, done=True, done_reason="stop",
                               message=Message(role="assistant", content="", tool_calls=[call]))
        else:
            yield ChatResponse(model=model, done=True, done_reason="stop",
                               message=Message(role="assistant", content="done"))


def one_run(iterations: int) -> float:
    loop = AgentLoop(InstantModel(iterations), "bench", PacketFactory(),  # type: ignore[arg-type]
                     tools=[calculator_tool()], max_iterations=iterations + 1)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    start = time.perf_counter()
    packets = sum(1 for _ in loop.run(messages))
    elapsed = time.perf_counter() - start
    assert loop.state.iterations == iterations and packets >= 2 * (iterations - 1)
    return elapsed / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    one_run(10)  # warm imports
    per_iteration = statistics.median(one_run(args.iterations) for _ in range(args.runs))
    print(f"loop overhead per iteration: {per_iteration * 1000:.3f} ms "
          f"(median of {args.runs} runs x {args.iterations} iterations; target <= 5 ms)")


if __name__ == "__main__":
    main()
