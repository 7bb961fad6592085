"""The Ray engine against the plain one on this machine: what Ray costs where it cannot pay.

    python -m tests.bench.ray_ingest [--files 60] [--runs 3]

A corpus of `--files` Markdown files (~3 chunks each) is ingested into a fresh store by a
real `localgpt ingest` process, embedded by the Ollama stand-in started here (hashed
bag-of-words vectors, 768-d: embedding costs almost nothing, so what is measured is each
engine's own overhead), `--runs` times with each engine: the plain one, and `--engine ray`
with a Ray instance started in the process (the machine's cores). Reported per engine: the
median wall time and rows (chunks) per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT
from tests.kb import paragraph
from tests.standin import StandIn


def _corpus(folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for i in range(files):
        body = "\n\n".join(paragraph(i * 10 + j, 60) for j in range(5))
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\n{body}\n")


def _run(standin: StandIn, corpus: Path, home: Path, *args: str) -> tuple[float, int]:
    env = {**os.environ, "LOCALGPT_HOME": str(home), "OLLAMA_HOST": standin.url,
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", "ingest", str(corpus), "--json", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    summary = json.loads(out.stdout.splitlines()[-1])
    return seconds, int(summary["chunks"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    standin = StandIn().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus"
            _corpus(corpus, args.files)
            times: dict[str, list[float]] = {"plain": [], "ray": []}
            rows = 0
            for n in range(args.runs):  # alternated, so the machine's load hits both
                for engine in ("plain", "ray"):
                    home = Path(tmp) / f"{engine}{n}"
                    seconds, rows = _run(standin, corpus, home, "--engine", engine)
                    times[engine].append(seconds)
            for engine, values in times.items():
                median = statistics.median(values)
                print(f"{engine:5}  {args.files} files, {rows} rows: median {median:.1f} s "
                      f"({rows / median:.1f} rows/s) over {args.runs} runs "
                      f"{[round(v, 1) for v in values]}")  # fmt: skip
            ratio = statistics.median(times["ray"]) / statistics.median(times["plain"])
            print(f"ray / plain wall time: {ratio:.1f}x; load average {os.getloadavg()[0]:.1f}")
    finally:
        standin.stop()


if __name__ == "__main__":
    main()
