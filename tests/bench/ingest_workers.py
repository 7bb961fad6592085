"""Ingest on every core: --workers 1 vs 2, embedding requests in flight, memory.

    python -m tests.bench.ingest_workers [--mb 20] [--runs 3] [--pdfs 200]
                                         [--delay 0.5] [--delay-mb 2] [--memory]
                                         [--memory-workers 1,2]

Every figure compares runs made in this one process, alternated (1, 2, 1, 2, ...), each
`localgpt ingest` a real process with a fresh home; medians are reported, and ratios are
taken between the medians, so a machine loaded by other work slows both sides alike.

1. `--mb` of tests/bench/ingest.py's mixed corpus (Markdown, code, text, a few PDFs;
   `--mb 200` is the README's 200 MB corpus), Ollama unreachable and `--no-fallback`, so
   nothing waits on embeddings: MB/s of parse + chunk + store (the run as ingest times
   it, minus the final optimize, which it times too), and of the whole process.
2. The PDF share: `--pdfs` PDFs of 4 pages (the corpus's kind) alone: pages/s, the same way.
3. Embedding requests in flight: `--delay-mb` of the corpus against the stand-in, each
   embedding request held `--delay` seconds (as a GPU server's batch takes; its vectors
   cost next to nothing, see `_cheap_vectors`), with `[ingest] concurrency = 1` vs `= 2`:
   wall time of the process.
4. With `--memory`: the `--mb` corpus with embeddings (the stand-in), --workers 1 vs 2:
   peak of the summed RSS of the ingest process and its workers, sampled every 50 ms,
   where it fell (streaming, or the final optimize: compaction, full-text and vector
   indexes; the seconds into the run, and the optimize's own), and the ingest process's
   own peak (getrusage). `--memory-workers 1` measures one worker count only (a 200 MB
   run with embeddings takes ~10 minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.bench.common import ROOT
from tests.bench.ingest import generate, pdf_page
from tests.pdfgen import make_pdf
from tests.standin import StandIn


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _tree(pid: int) -> list[int]:
    """`pid` and its children, except a child still running the parent's command: one
    forked for a subprocess (Tesseract on a PDF page) reports the parent's pages as its
    own until it execs, which would count them twice (a 516 MB sample among ~330)."""
    pids = [pid]
    parent = _cmdline(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            child = int(entry.name)
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and _cmdline(child) != parent:
                pids.append(child)
    return pids


def ingest(corpus: Path, home: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    """One `localgpt ingest` process: summary, wall time, peak summed RSS (sampled), and
    where the peak fell: while files stream in (workers running) or in the final optimize,
    which starts after the last `document` record (compaction, then the indexes)."""
    cmd = [sys.executable, "-m", "tests.bench.ingest", "--child", "ingest", str(corpus),
           "--json", *args]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env, "LOCALGPT_HOME": str(home)}, cwd=ROOT)  # fmt: skip
    peak = [0, 0.0, 0]  # summed KB, seconds since start, processes
    last_document = [0.0]
    lines: list[bytes] = []

    def sample() -> None:
        while proc.poll() is None:
            pids = _tree(proc.pid)
            total = sum(_rss_kb(p) for p in pids)
            if total > peak[0]:
                peak[:] = [total, time.perf_counter() - start, len(pids)]
            time.sleep(0.05)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(b"{") and json.loads(line)["type"] == "document":
                last_document[0] = time.perf_counter() - start

    threads = [threading.Thread(target=f, daemon=True) for f in (sample, read)]
    for thread in threads:
        thread.start()
    err = proc.stderr.read() if proc.stderr else b""
    proc.wait()
    seconds = time.perf_counter() - start
    for thread in threads:
        thread.join()
    records = [json.loads(line) for line in lines if line.startswith(b"{")]
    summary = next(r for r in records if r["type"] == "summary")
    own = int(err.decode().rsplit("maxrss_kb=", 1)[1].split()[0])
    phase = "streaming" if peak[1] <= last_document[0] else "final optimize"
    where = f"{phase}, {peak[2]} process(es), {peak[1]:.0f} s of {seconds:.0f}"
    return {"code": proc.returncode, "seconds": seconds, "summary": summary,
            "peak_sum_mb": peak[0] / 1024, "peak_own_mb": own / 1024,
            "peak_phase": where}  # fmt: skip


def _work_s(run: dict[str, Any]) -> float:
    s = run["summary"]
    return (s["ms"] - s["embed_ms"] - s["optimize_ms"]) / 1000


def alternate(n: int, make: Any, sides: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for i in range(n):
        for side in sides:
            runs[side].append(make(side, i))
    return runs


def pdf_corpus(root: Path, count: int) -> int:
    """`count` PDFs of 4 pages of prose, as tests/bench/ingest.py writes; the pages."""
    import numpy as np

    rng = np.random.default_rng(3)
    root.mkdir(parents=True)
    for i in range(count):
        make_pdf(root / f"p{i}.pdf", [pdf_page(rng) for _ in range(4)])
    return count * 4


def _cheap_vectors(texts: list[str]) -> list[list[float]]:
    """A unit vector per text, told apart by its hash: costs next to nothing."""
    import numpy as np

    seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "little")
             for t in texts]  # fmt: skip
    rows = np.zeros((len(texts), 768), dtype=np.float32)
    rows[np.arange(len(texts)), [s % 768 for s in seeds]] = 1.0
    return rows.tolist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ingest_workers",
                                     description=__doc__)  # fmt: skip
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pdfs", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--delay-mb", type=float, default=2)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--memory-workers", default="1,2", help="worker counts of --memory")
    parser.add_argument("--skip", default="", help="parts to skip: mbs,pdf,delay")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp, StandIn() as standin:
        tmp_path = Path(tmp)
        env = {**os.environ, "OLLAMA_HOST": standin.url}
        for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_EMBED_MODEL"):
            env.pop(var, None)
        down = {**env, "OLLAMA_HOST": "http://127.0.0.1:9"}
        corpus = tmp_path / "corpus"
        size = generate(corpus, int(args.mb * 100), args.mb, seed=8)
        homes = iter(range(10**6))

        def fresh() -> Path:
            return tmp_path / f"h{next(homes)}"

        if "mbs" not in args.skip:
            runs = alternate(args.runs, lambda side, _: ingest(
                corpus, fresh(), down, "--no-fallback", "--workers", side), ("1", "2"))  # fmt: skip
            figures["no_embeddings"] = _speed(runs, size / 1e6, "MB/s")
        if "pdf" not in args.skip:
            pdfs = tmp_path / "pdfs"
            pages = pdf_corpus(pdfs, args.pdfs)
            runs = alternate(args.runs, lambda side, _: ingest(
                pdfs, fresh(), down, "--no-fallback", "--workers", side), ("1", "2"))  # fmt: skip
            figures["pdf_pages"] = _speed(runs, pages, "pages/s")
        if "delay" not in args.skip:
            small = tmp_path / "small"
            generate(small, int(args.delay_mb * 100), args.delay_mb, seed=9)
            configs = {}
            for n in ("1", "2"):
                configs[n] = tmp_path / f"config{n}.toml"
                configs[n].write_text(f"[ingest]\nconcurrency = {n}\n")
            standin.embed_delay = args.delay
            # The stand-in's own bag-of-words vectors cost Python time in this process,
            # one request at a time (the GIL), about as long as the delay on a loaded
            # machine: that would be measured instead of the requests in flight. A GPU
            # server's batch is the delay alone, so cheap vectors stand in for it here.
            standin.set_embedder("nomic-embed-text", _cheap_vectors)
            runs = alternate(args.runs, lambda side, _: ingest(
                small, fresh(), {**env, "LOCALGPT_CONFIG": str(configs[side])}), ("1", "2"))
            standin.embed_delay = 0.0
            walls = {side: statistics.median(r["seconds"] for r in rs) for side, rs in runs.items()}
            figures["in_flight"] = {
                "delay_s": args.delay,
                "requests": runs["1"][0]["summary"]["embed_requests"],
                "wall_s_1": round(walls["1"], 1), "wall_s_2": round(walls["2"], 1),
                "speedup": round(walls["1"] / walls["2"], 2),
            }  # fmt: skip
        if args.memory:
            runs = alternate(1, lambda side, _: ingest(corpus, fresh(), env, "--workers", side),
                             tuple(args.memory_workers.split(",")))  # fmt: skip
            figures["memory"] = {
                f"workers_{side}": {"peak_sum_mb": round(r[0]["peak_sum_mb"]),
                                    "peak_ingest_mb": round(r[0]["peak_own_mb"]),
                                    "peak_phase": r[0]["peak_phase"],
                                    "optimize_s": round(r[0]["summary"]["optimize_ms"] / 1000, 1),
                                    "chunks": r[0]["summary"]["chunks"],
                                    "wall_s": round(r[0]["seconds"], 1)}
                for side, r in runs.items()
            }  # fmt: skip
    print(json.dumps(figures, indent=2))
    return 0


def _speed(runs: dict[str, list[dict[str, Any]]], amount: float, unit: str) -> dict[str, Any]:
    """Medians of each side, and the ratio of the medians."""
    out: dict[str, Any] = {"amount": round(amount, 1), "unit": unit}
    for side, rs in runs.items():
        assert all(r["code"] == 3 for r in rs), [r["code"] for r in rs]
        out[f"workers_{side}"] = {
            "rate": round(amount / statistics.median(_work_s(r) for r in rs), 1),
            "rate_whole_process": round(amount / statistics.median(r["seconds"] for r in rs), 1),
            "rates": [round(amount / _work_s(r), 1) for r in rs],
            "peak_sum_mb": round(max(r["peak_sum_mb"] for r in rs)),
        }  # fmt: skip
    out["speedup"] = round(out["workers_2"]["rate"] / out["workers_1"]["rate"], 2)
    out["speedup_whole_process"] = round(
        out["workers_2"]["rate_whole_process"] / out["workers_1"]["rate_whole_process"], 2
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
