"""`chat --schema`'s cost: validation per answer, and `--help` start-up beside a checkout
without it.

Run: python -m tests.bench.schema [--answers 2000] [--runs 15] [--baseline /path/to/checkout]
Per answer: the whole structured turn's loop (kernel/structured.py: the schema in the
prompt, the check with jsonschema, the value) minus the plain agent loop's, both fed by
an instant in-process model, and the check alone; the first check in a process (importing
jsonschema, building the validator) is reported on its own. Start-up: `python -m
localgpt_cli --help` of this checkout and of `--baseline` (the code before --schema),
round-robin, each as a ratio to `python -c "import click"`. Targets: <= 5 ms per answer;
start-up unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ollama import ChatResponse, Message

from tests.bench.common import interleaved_medians, wall

ROOT = Path(__file__).resolve().parents[2]
SPEC = "title, severity int, urgent bool, tags: short labels"
ANSWER = json.dumps({"title": "The build server's disk is full", "severity": 3,
                     "urgent": True, "tags": "disk, ci"})  # fmt: skip


class InstantModel:
    """Answers every call at once with the same JSON."""

    def chat(self, model: str, messages: list[dict[str, Any]], **_: Any) -> Any:
        return ChatResponse(model=model, done=True, done_reason="stop",
                            message=Message(role="assistant", content=ANSWER))

    def chat_stream(self, model: str, messages: list[dict[str, Any]], **_: Any) -> Iterator[Any]:
        yield self.chat(model, messages)


def per_answer(answers: int, structured: bool) -> float:
    from localgpt_cli.kernel.loop import AgentLoop
    from localgpt_cli.kernel.packets import PacketFactory
    from localgpt_cli.kernel.structured import StructuredLoop
    from localgpt_cli.structured.spec import StructuredSpec, read_spec

    spec = StructuredSpec(read_spec(SPEC))
    start = time.perf_counter()
    for _ in range(answers):
        if structured:
            loop: AgentLoop = StructuredLoop(InstantModel(), "bench", PacketFactory(),  # type: ignore[arg-type]
                                             spec=spec)
        else:
            loop = AgentLoop(InstantModel(), "bench", PacketFactory(), stream=False)  # type: ignore[arg-type]
        for _ in loop.run([{"role": "user", "content": "triage"}]):
            pass
    return (time.perf_counter() - start) / answers


def check_alone(answers: int) -> float:
    from localgpt_cli.structured.spec import read_spec
    from localgpt_cli.structured.validate import check

    schema = read_spec(SPEC)
    start = time.perf_counter()
    for _ in range(answers):
        assert check(ANSWER, schema)[1] is None
    return (time.perf_counter() - start) / answers


def first_check() -> float:
    """A fresh process's first check: jsonschema imported, the validator built."""
    code = ("import time; t = time.perf_counter()\n"
            "from localgpt_cli.structured.spec import read_spec\n"
            "from localgpt_cli.structured.validate import check\n"
            f"assert check({ANSWER!r}, read_spec({SPEC!r}))[1] is None\n"
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return float(out.stdout)


def startup(runs: int, baseline: str | None) -> dict[str, float]:
    def help_of(root: Path) -> float:
        """`python -m` puts the working folder first on the path: run in `root`."""
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "localgpt_cli", "--help"], cwd=root,
                       stdout=subprocess.DEVNULL, check=True,
                       env={**os.environ, "PYTHONPATH": str(root)})
        return time.perf_counter() - start

    cases = {"import click": lambda: wall([sys.executable, "-c", "import click"]),
             "--help (this checkout)": lambda: help_of(ROOT)}  # fmt: skip
    if baseline:
        cases["--help (baseline)"] = lambda: help_of(Path(baseline))
    for fn in cases.values():
        fn()
    return interleaved_medians(cases, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", help="a checkout without --schema, for start-up")
    args = parser.parse_args()
    check_alone(10)  # the import and the validator, outside the timing
    rounds = [(per_answer(args.answers, True), per_answer(args.answers, False),
               check_alone(args.answers)) for _ in range(5)]  # fmt: skip
    structured, plain, alone = (statistics.median(r[i] for r in rounds) for i in range(3))
    firsts = statistics.median(first_check() for _ in range(5))
    print(f"validation overhead per answer: {(structured - plain) * 1000:.3f} ms "
          f"(structured loop {structured * 1000:.3f} ms, plain {plain * 1000:.3f} ms; "
          f"the check alone {alone * 1000:.3f} ms; target <= 5 ms)")
    print(f"first check in a process (import jsonschema, build the validator): "
          f"{firsts * 1000:.0f} ms")
    medians = startup(args.runs, args.baseline)
    base = medians["import click"]
    for name, value in medians.items():
        print(f"{name:26} {value * 1000:8.1f} ms {value / base:6.2f}x import click")


if __name__ == "__main__":
    main()
