"""Shared helpers for the benchmarks: timing, medians, a stand-in in a child process."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wall(cmd: Sequence[str], env: dict[str, str] | None = None) -> float:
    """Seconds one command takes, stdout discarded."""
    start = time.perf_counter()
    subprocess.run(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def interleaved_medians(cases: dict[str, Callable[[], float]], runs: int) -> dict[str, float]:
    """Run the cases round-robin (so machine noise hits all alike) and return medians."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, fn in cases.items():
            samples[name].append(fn())
    return {name: statistics.median(v) for name, v in samples.items()}


@contextmanager
def standin_process(*args: str) -> Iterator[str]:
    """Start `python -m tests.standin` in a child process and yield its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.standin", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
