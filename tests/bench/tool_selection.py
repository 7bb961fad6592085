"""Tool-selection benchmark: 200 tools, warm-cache latency and cold-path request count.

    python -m tests.bench.tool_selection [--tools 200] [--dim 768] [--batch 64] [--runs 200]

The embedding model is stood in for by the stand-in's deterministic hashed bag of words
(`tests.standin.hashed_embeddings`), batched the way the integrator's embed callable
batches requests to /api/embed, so the figures count requests, not model time. "Warm"
is what every turn after the first costs: read the vector cache file, embed the user
message (one request), hash the tool texts, score and pick. "Cold" embeds all tool texts.
"Groups" spreads the tools over 5 groups and allows 2 (`chat --tools g0,g1`): the
context filter runs first, then the same top-K within the ~80 allowed tools; its warm
runs alternate with the ungrouped ones (round robin), so the two medians compare.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from localgpt_cli.tools.base import Tool
from localgpt_cli.tools.selection import select_tools
from tests.standin import hashed_embeddings

_VERBS = [
    "fetch",
    "list",
    "create",
    "delete",
    "update",
    "archive",
    "summarise",
    "translate",
    "schedule",
    "track",
    "export",
]
_NOUNS = [
    "invoice",
    "ticket",
    "calendar",
    "playlist",
    "recipe",
    "shipment",
    "repository",
    "sensor",
    "contract",
    "flight",
    "podcast",
    "inventory",
    "lead",
    "warehouse",
    "meeting",
    "backup",
]
_DETAILS = [
    "by id",
    "with filters",
    "for the current user",
    "in bulk",
    "from the cloud account",
    "as a report",
    "for a date range",
    "with attachments",
]


class CountingEmbed:
    """An embed callable that splits its input into requests of `batch` texts."""

    def __init__(self, dim: int, batch: int = 64):
        self.dim = dim
        self.batch = batch
        self.calls = 0
        self.requests = 0
        self.texts: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts.append(list(texts))
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            self.requests += 1
            vectors.extend(hashed_embeddings(texts[start : start + self.batch], self.dim))
        return vectors


def generated_tools(n: int, core: int = 4, seed: int = 7) -> list[Tool]:
    """`core` core tools, one currency converter, and generated look-alike tools."""
    rng = random.Random(seed)
    tools = [
        Tool(
            name=f"core_{i}",
            description=f"Core helper number {i}.",
            parameters={"type": "object", "properties": {}},
            handler=lambda args: "ok",
            core=True,
        )
        for i in range(core)
    ]
    tools.append(
        Tool(
            name="convert_currency",
            description="Convert an amount of money between currencies at today's rate.",
            parameters={"type": "object", "properties": {"amount": {"type": "number"}}},
            handler=lambda args: "ok",
            examples=("how many euros is 50 dollars?", "convert 100 USD to yen"),
        )
    )
    i = 0
    while len(tools) < n:
        verb, noun, detail = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_DETAILS)
        tools.append(
            Tool(
                name=f"{verb}_{noun}_{i}",
                description=f"{verb.capitalize()} {noun}s {detail}.",
                parameters={"type": "object", "properties": {"id": {"type": "string"}}},
                handler=lambda args: "ok",
                examples=(f"{verb} my {noun}s", f"please {verb} the {noun} {detail}"),
            )
        )
        i += 1
    return tools


def in_groups(tools: list[Tool], groups: int = 5) -> list[Tool]:
    """The tools spread round-robin over `groups` groups g0…; the converter is in g0."""
    import dataclasses

    return [dataclasses.replace(t, group="g0" if t.name == "convert_currency" else f"g{i % groups}")
            for i, t in enumerate(tools)]


def _numpy_import_ms() -> float:
    """A fresh process's cost of `import numpy` (paid once per CLI run that selects)."""
    code = "import time; t = time.perf_counter(); import numpy; print(time.perf_counter() - t)"
    samples = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(5)
    ]
    return statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args(argv)

    tools = generated_tools(args.tools)
    query = "convert currency: how many euros is 50 dollars?"
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        cold = CountingEmbed(args.dim, args.batch)
        start = time.perf_counter()
        first = select_tools(tools, query, embed=cold, embed_model="bench", cache_dir=cache)
        cold_ms = (time.perf_counter() - start) * 1000
        assert first.method == "semantic" and "convert_currency" in first.offered_names
        non_core = sum(not t.core for t in tools)

        grouped, allowed = in_groups(tools), ["g0", "g1"]
        warm, warm_grouped = CountingEmbed(args.dim, args.batch), CountingEmbed(args.dim)
        select_tools(grouped, query, embed=warm_grouped, embed_model="bench", cache_dir=cache,
                     groups=allowed)  # same texts: the cache is already warm for them
        samples, grouped_samples = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            chosen = select_tools(tools, query, embed=warm, embed_model="bench", cache_dir=cache)
            samples.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            in_two = select_tools(grouped, query, embed=warm_grouped, embed_model="bench",
                                  cache_dir=cache, groups=allowed)
            grouped_samples.append((time.perf_counter() - start) * 1000)
        assert chosen.offered_names == first.offered_names
        assert in_two.method == "semantic" and "convert_currency" in in_two.offered_names
        assert {t.group for t in in_two.tools} <= set(allowed)
        assert warm_grouped.requests == 1 + args.runs  # the query only: no tool text embedded
        cache_bytes = sum(f.stat().st_size for f in cache.iterdir())

    samples.sort()
    p95 = samples[int(0.95 * (len(samples) - 1))]
    rows = [
        ("tools enabled / offered", f"{len(tools)} / {len(first.tools)} (core + top 6)"),
        ("embedding dimension", str(args.dim)),
        ("cold: tool texts embedded", f"{len(cold.texts[1])} (core tools need no vector)"),
        (
            "cold: tool-text requests",
            f"{cold.requests - 1} (ceil({non_core}/{args.batch}) = "
            f"{math.ceil(non_core / args.batch)}; ceil({len(tools)}/{args.batch}) = "
            f"{math.ceil(len(tools) / args.batch)})",
        ),
        ("cold: embed calls / requests", f"{cold.calls} / {cold.requests} (incl. 1 for the query)"),
        ("cold: selection time", f"{cold_ms:.1f} ms (mostly the pure-Python stand-in embed)"),
        ("warm: requests per turn", f"{warm.requests / args.runs:g} (the query)"),
        ("warm: median selection time", f"{statistics.median(samples):.2f} ms (target <= 10)"),
        ("warm: p95 selection time", f"{p95:.2f} ms"),
        ("groups: allowed / offered", f"{len(in_two.allowed)} of {len(grouped)} in "
         f"{', '.join(allowed)} / {len(in_two.tools)}"),
        ("groups: warm median selection time",
         f"{statistics.median(grouped_samples):.2f} ms (ratio to ungrouped "
         f"{statistics.median(grouped_samples) / statistics.median(samples):.2f}x)"),
        ("vector cache file", f"{cache_bytes / 1024:.0f} KiB"),
        ("import numpy, fresh process", f"{_numpy_import_ms():.0f} ms (once per run)"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
