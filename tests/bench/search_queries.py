"""`search --queries` speed on Cranfield: this checkout against a baseline commit, one run.

    python -m tests.bench.search_queries [--baseline COMMIT] [--runs 5] [-k 10,100] [--keep DIR]

Cranfield (tests/data/cranfield) is ingested once by `localgpt ingest` (all-minilm)
against the Ollama stand-in serving the real all-MiniLM-L6-v2 in NumPy (tests/embedder,
disk-cached: the first run embeds ~4,100 chunks, minutes on 2 cores; `--keep DIR` keeps
the collection for the next run). The baseline commit (default: `BEFORE`) is exported with
`git archive` into a temporary folder; then whole `python -m localgpt_cli search --queries
QUERIES --json` processes of the baseline and of this checkout run alternately, with the
same venv, collection and stand-in, at k=10 and k=100 (hybrid, the default fast path:
reranker and gate). Prints the median wall time (and queries/s) and CPU time of each and
their ratios, and checks that the two print the same bytes. On a loaded machine wall time
is mostly waiting for a core; CPU time is the steadier figure, though it cannot show what
running on two cores at once gains.

    python -m tests.bench.search_queries --one-shot [--baseline COMMIT] [--runs 5]

times one-shot `search -k 5 --json QUESTION` processes (Cranfield's first question) of
the baseline and of this checkout instead, alternately: a batch's speed must not cost
the single search its latency.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.cranfield import DATA_DIR, write_corpus_files

ROOT = Path(__file__).resolve().parents[2]
QUERIES = DATA_DIR / "queries.jsonl"
MODEL = "all-minilm"
# main before `search --queries` batched its vector side and used a second core.
BEFORE = "e5f75395e429aaa29309e5c95029e0161a4e0e03"


def export(commit: str, dest: Path) -> Path:
    """The baseline's tree at `commit`, unpacked into `dest` (only what runs: the package)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "localgpt_cli"],
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def timed_search(code: Path, env: dict[str, str], k: int,
                 one: str | None = None) -> tuple[float, float, bytes]:  # fmt: skip
    """Seconds one whole `search --queries` process (or, given `one`, `search -k 5 ONE`)
    of the package under `code` takes, wall and CPU (user + system, its threads
    included), and its stdout."""
    args = ["--queries", str(QUERIES), "-k", str(k)] if one is None else ["-k", "5", one]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", "search", *args, "--json"],
        capture_output=True, env={**env, "PYTHONPATH": str(code)}, cwd=code,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"search under {code} failed ({proc.returncode}):\n{proc.stderr!r}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, proc.stdout


def ingest(env: dict[str, str], folder: Path) -> None:
    """Cranfield as one file per document, ingested once (skipped when already there)."""
    if (Path(env["LOCALGPT_HOME"]) / "lancedb" / "default.lance").exists():
        return
    corpus = folder / "cranfield"
    write_corpus_files(corpus)
    subprocess.run([sys.executable, "-m", "localgpt_cli", "ingest", str(corpus)],
                   env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def compare(env: dict[str, str], baseline: Path, runs: int, ks: list[int],
            one: str | None = None) -> None:  # fmt: skip
    """Both sides alternately, `runs` times at each k: medians of wall and CPU time."""
    lines = [line for line in QUERIES.read_text().splitlines() if line.strip()]
    count = 1 if one is not None else len(lines)
    sides = {"baseline": baseline, "this": ROOT}
    for k in ks:
        wall: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        outputs: dict[str, bytes] = {}
        for name, code in sides.items():  # warm the page cache, keep one output each
            outputs[name] = timed_search(code, env, k, one)[2]
        same = outputs["baseline"] == outputs["this"]
        for _ in range(runs):
            for name, code in sides.items():
                seconds, used, _ = timed_search(code, env, k, one)
                wall[name].append(seconds)
                cpu[name].append(used)
        median = {name: statistics.median(v) for name, v in wall.items()}
        median_cpu = {name: statistics.median(v) for name, v in cpu.items()}
        for name in sides:
            runs_text = ", ".join(f"{t:.2f}" for t in wall[name])
            print(f"k={k:<3} {name:<8} wall {median[name]:.2f} s median of {runs} = "
                  f"{count / median[name]:.1f} queries/s (runs {runs_text}); "
                  f"CPU {median_cpu[name]:.2f} s", flush=True)  # fmt: skip
        print(f"k={k:<3} speed-up {median['baseline'] / median['this']:.2f}x wall, "
              f"{median_cpu['baseline'] / median_cpu['this']:.2f}x CPU; same output: {same} "
              f"({len(outputs['this'])} bytes); load {os.getloadavg()[0]:.1f}",
              flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BEFORE, help="commit to compare with "
                        "[default: the last one before batched vector search]")
    parser.add_argument("--runs", type=int, default=5, help="alternating runs per side")
    parser.add_argument("-k", default="10,100", help="comma-separated k values")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the ingested collection in DIR (reused when there)")
    parser.add_argument("--one-shot", action="store_true",
                        help="time one-shot `search -k 5 QUESTION` processes instead")
    args = parser.parse_args(argv)

    from tests.embedder import shared_embedder
    from tests.standin import StandIn

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.baseline],
                            capture_output=True, text=True, check=True).stdout.strip()
    print(f"baseline {commit}", flush=True)
    server = StandIn().start()
    server.set_embedder(f"{MODEL}:latest", shared_embedder().embed)
    try:
        with tempfile.TemporaryDirectory(prefix="search-queries-") as scratch:
            work = args.keep or Path(scratch)
            work.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "LOCALGPT_HOME": str(work / "home"),
                   "OLLAMA_HOST": server.url, "LOCALGPT_EMBED_MODEL": MODEL,
                   "XDG_CONFIG_HOME": str(work / "config"),
                   "XDG_CACHE_HOME": str(work / "cache")}  # fmt: skip
            for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_CONFIG", "PYTHONPATH"):
                env.pop(var, None)
            ingest({**env, "PYTHONPATH": str(ROOT)}, work)
            baseline = Path(scratch) / "baseline"
            baseline.mkdir()
            export(commit, baseline)
            if args.one_shot:
                first = json.loads(QUERIES.read_text().splitlines()[0])["text"]
                compare(env, baseline, args.runs, [5], first)
            else:
                compare(env, baseline, args.runs, [int(k) for k in args.k.split(",")])
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
