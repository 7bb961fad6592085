"""CPU seconds of each phase of `localgpt ingest`, this checkout against another one.

    python -m tests.bench.ingest_cpu --baseline DIR [--mb 20] [--runs 3] [--workers 2]

On a machine shared with other work, wall times say little and ratios of MB/s less; the
CPU a phase takes moves far less with the load. Each run is one `localgpt ingest` of
tests/bench/ingest.py's mixed corpus (Ollama down, `--no-fallback`, a fresh home) in a
process that times, in CPU seconds of all its threads: the walk, opening the collection
(importing LanceDB), classifying the files (hashing the new ones), the streaming of
files through parsing, embedding and commits, and the end (the final optimize); and the
worker processes' CPU, all of them together. The checkouts are alternated (this one,
DIR, this one, ...) and medians reported. DIR is a checkout of another commit (`git
worktree add DIR COMMIT`): its `localgpt_cli` is imported, this file's code wraps it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__" and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # tests/bench's modules (memory.py, search.py...) must not shadow others

PHASES = ("walk", "open_collection", "classify", "process", "finish")


def child(argv: list[str]) -> None:
    """One ingest in this process, its phases timed; prints one JSON line on stderr."""
    import functools
    import resource

    import localgpt_cli.rag.ingest.run as run_mod
    from localgpt_cli.cli.main import main
    from localgpt_cli.rag.ingest import plan

    cpu: dict[str, float] = {}

    def timed(owner: object, name: str, label: str, gen: bool) -> None:
        f = getattr(owner, name)

        def plain(*a: object, **k: object) -> object:
            start = time.process_time()
            try:
                return f(*a, **k)
            finally:
                cpu[label] = time.process_time() - start

        def generator(*a: object, **k: object) -> object:
            start = time.process_time()
            yield from f(*a, **k)
            cpu[label] = time.process_time() - start

        setattr(owner, name, functools.wraps(f)(generator if gen else plain))

    timed(plan, "found_files", "walk", False)
    timed(run_mod, "open_collection", "open_collection", True)
    timed(plan, "classify", "classify", False)
    timed(run_mod, "process", "process", True)
    timed(run_mod.Ingest, "_finish", "finish", True)
    with contextlib.suppress(SystemExit):
        main(argv)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu["workers"] = workers.ru_utime + workers.ru_stime
    sys.stdout.flush()
    sys.stderr.write("\nPHASES " + json.dumps(cpu) + "\n")


def one(tree: Path, corpus: Path, home: Path, workers: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OLLAMA_HOST": "http://127.0.0.1:9",
           "LOCALGPT_HOME": str(home)}  # fmt: skip
    for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_EMBED_MODEL"):
        env.pop(var, None)
    cmd = [sys.executable, __file__, "--child", "ingest", str(corpus), "--json",
           "--no-fallback", "--workers", str(workers)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    shutil.rmtree(home, ignore_errors=True)
    return json.loads(proc.stderr.rsplit("PHASES ", 1)[1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ingest_cpu", description=__doc__)
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[2]
    trees = {"this": here, "baseline": args.baseline.resolve()}
    sys.path.insert(0, str(here))
    from tests.bench.ingest import generate

    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="bench-cpu-") as tmp:
        corpus = Path(tmp) / "corpus"
        size = generate(corpus, int(args.mb * 100), args.mb, seed=8)
        for i in range(args.runs):
            for name, tree in trees.items():
                runs[name].append(one(tree, corpus, Path(tmp) / f"h{i}{name}", args.workers))
    figures: dict[str, object] = {"mb": round(size / 1e6, 1), "workers": args.workers,
                                  "load_average": os.getloadavg()[0]}  # fmt: skip
    for name, rs in runs.items():
        med = {k: round(statistics.median(r.get(k, 0.0) for r in rs), 2)
               for k in (*PHASES, "workers")}  # fmt: skip
        med["parse_chunk_store"] = round(sum(med[k] for k in (*PHASES[:4], "workers")), 2)
        figures[name] = med
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
