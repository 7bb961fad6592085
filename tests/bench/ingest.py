"""Ingest benchmark: throughput, embed requests, peak memory, and the unchanged re-run.

    python -m tests.bench.ingest [--files 2000] [--mb 20] [--small-files 10000]
                                 [--big-mb 200 [--big-embed]] [--batch-size 64] [--json]

1. A generated corpus of `--files` mixed files (~`--mb` MB: Markdown, code, text and a
   few PDFs written with tests/pdfgen.py) is ingested by a real `localgpt ingest` process
   against a stand-in Ollama started here (its hashed bag-of-words embeddings, 768-d).
   Reported: wall time; MB/s for parse + chunk + store (the run as ingest times it, minus
   the time spent waiting for embeddings and the final optimize, which it times too); embed
   requests against ceil(embedded texts / batch size); peak RSS of the process.
2. The same corpus again, unchanged: embed requests (must be 0) and wall time.
3. `--small-files` small files, ingested once, then the unchanged re-run timed in process
   (lancedb already imported, as in a long-lived caller), and as a one-shot process.
4. With `--big-mb`: a corpus of that size ingested with Ollama unreachable and
   `--no-fallback` (chunks stored without vectors; the run fails loudly if its summary
   says anything was embedded), to show that memory stays flat while streaming; with `--big-embed`
   also embedded by the stand-in, which takes minutes at 200 MB.

Each ingest process runs through a small wrapper that reports its own peak RSS and CPU
seconds (getrusage(RUSAGE_SELF) at exit), since RUSAGE_CHILDREN is a maximum over all
children.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.common import ROOT
from tests.pdfgen import make_pdf
from tests.standin import StandIn

VOCABULARY = 5000
CODE_EXT = ("py", "js", "ts", "go", "rs", "java", "c", "rb", "sh", "sql", "yaml", "toml")


def _words(rng: np.random.Generator, n: int) -> list[str]:
    # Zipf-ish word frequencies, like language: a few words everywhere, most rare.
    ids = np.minimum(rng.zipf(1.3, n), VOCABULARY) - 1
    return [f"w{i}" for i in ids]


# A PDF page of "w4999 w12 ..." reads as a garbled text layer to rag/parse/textlayer.py (no
# token holds a run of two letters), so ingest would OCR every page of the corpus's PDFs. Their
# pages spell each digit as a letter instead ("weiii"): words, as a real PDF's text layer has.
_DIGITS_AS_LETTERS = str.maketrans("0123456789", "abcdefghij")


def pdf_page(rng: np.random.Generator, size: int = 1500) -> str:
    """A PDF page of prose whose text layer ingest keeps (no OCR), wrapped to lines."""
    return _wrap(_prose(rng, size).replace("\n\n", " ").translate(_DIGITS_AS_LETTERS))


def _prose(rng: np.random.Generator, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(_words(rng, int(rng.integers(6, 20)))).capitalize() + "."
        out.append(sentence)
        length += len(sentence) + 1
        if rng.random() < 0.2:
            out.append("\n\n")
    return " ".join(out)


def _markdown(rng: np.random.Generator, size: int) -> str:
    parts, length, n = [], 0, 0
    while length < size:
        block = f"## Section {n}\n\n{_prose(rng, int(rng.integers(300, 1500)))}\n\n"
        parts.append(block)
        length += len(block)
        n += 1
    return "# Document\n\n" + "".join(parts)


def _code(rng: np.random.Generator, size: int) -> str:
    parts, length, n = [], 0, 0
    while length < size:
        names = _words(rng, 4)
        body = "\n".join(f"    {names[i]} = {names[i + 1]}({names[i + 2]})" for i in range(2))
        block = f"def f{n}_{names[0]}(x):\n    # {' '.join(_words(rng, 8))}\n{body}\n\n\n"
        parts.append(block)
        length += len(block)
        n += 1
    return "".join(parts)


def generate(root: Path, files: int, megabytes: float, seed: int = 7) -> int:
    """Write the mixed corpus; returns its size in bytes."""
    rng = np.random.default_rng(seed)
    pdfs = max(1, files // 200)
    per_file = int(megabytes * 1_000_000 / files)
    total = 0
    for i in range(files):
        folder = root / f"d{i % 40:02}"
        folder.mkdir(parents=True, exist_ok=True)
        size = max(200, int(rng.normal(per_file, per_file / 3)))
        if i < pdfs:
            path = make_pdf(folder / f"f{i}.pdf", [pdf_page(rng) for _ in range(4)])
        elif i % 10 < 4:
            path = folder / f"f{i}.md"
            path.write_text(_markdown(rng, size))
        elif i % 10 < 7:
            path = folder / f"f{i}.{CODE_EXT[i % len(CODE_EXT)]}"
            path.write_text(_code(rng, size))
        else:
            path = folder / f"f{i}.txt"
            path.write_text(_prose(rng, size))
        total += path.stat().st_size
    return total


def _wrap(text: str, width: int = 90) -> str:
    lines, line = [], ""
    for word in text.split():
        if len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def small_corpus(root: Path, files: int) -> None:
    rng = np.random.default_rng(11)
    for i in range(files):
        folder = root / f"s{i % 100:02}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n{_prose(rng, 150)}\n")


def run_child(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One `localgpt` process: its records, exit code, wall time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench.ingest", "--child", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    tail = proc.stderr.rsplit("maxrss_kb=", 1)[1].split()
    rss_kb, cpu = int(tail[0]), float(tail[1].removeprefix("cpu_s="))
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    summary = next((r for r in records if r["type"] == "summary"), {})
    return {"code": proc.returncode, "seconds": seconds, "rss_mb": rss_kb / 1024, "cpu_s": cpu,
            "summary": summary, "stderr": proc.stderr[-2000:]}  # fmt: skip


def child(argv: list[str]) -> None:
    from localgpt_cli.cli.main import main

    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    sys.stderr.write(f"\nmaxrss_kb={usage.ru_maxrss} cpu_s={cpu:.2f}\n")
    sys.stderr.flush()
    os._exit(code)


def in_process_rerun(corpus: Path, home: Path, host: str) -> float:
    """Seconds of an unchanged re-run inside this process (lancedb imported beforehand)."""
    from localgpt_cli.llm.ollama import OllamaClient
    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.ingest.run import Ingest
    from localgpt_cli.rag.store import open_store

    db = str(home / "lancedb")
    open_store(db).collection("default")  # import lancedb and warm the page cache
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        run = Ingest(
            IngestOptions(paths=[str(corpus)]),
            store=open_store(db),
            collection="default",
            model="nomic-embed-text",
            model_explicit=False,
            client=OllamaClient(host),
            home=home,
        )
        events = list(run.run())
        best = min(best, time.perf_counter() - start)
        assert events[-1]["unchanged"] > 0 and events[-1]["embed_requests"] == 0
    return best


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ingest", description=__doc__)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--small-files", type=int, default=10_000)
    parser.add_argument("--big-mb", type=float, default=0, help="e.g. 200 (takes minutes)")
    parser.add_argument("--big-embed", action="store_true",
                        help="also ingest the --big-mb corpus with embeddings (~7 min at 200)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp, StandIn() as standin:
        tmp_path = Path(tmp)
        env = {**os.environ, "OLLAMA_HOST": standin.url, "LOCALGPT_HOME": str(tmp_path / "h")}
        for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_EMBED_MODEL"):
            env.pop(var, None)
        corpus = tmp_path / "corpus"
        t = time.perf_counter()
        size = generate(corpus, args.files, args.mb)
        print(f"generated {args.files} files, {size / 1e6:.1f} MB in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)  # fmt: skip
        batch = ["--batch-size", str(args.batch_size)]
        first = run_child(["ingest", str(corpus), "--json", *batch], env)
        s = first["summary"]
        assert first["code"] == 0, first["stderr"]
        if (s.get("embedder"), s.get("fallback")) != ("nomic-embed-text", False):
            raise SystemExit(f"benchmark invalid: the stand-in run used {s.get('embedder')!r}")
        # the pipeline inside ingest: walk, hash, parse, chunk, commits (lancedb import too),
        # without interpreter start-up, embedding waits and the final optimize
        work = (s["ms"] - s["embed_ms"] - s["optimize_ms"]) / 1000
        figures["corpus"] = {
            "files": args.files, "mb": round(size / 1e6, 1), "chunks": s["chunks"],
            "wall_s": round(first["seconds"], 1), "embed_wait_s": s["embed_ms"] / 1000,
            "optimize_s": s["optimize_ms"] / 1000,
            "parse_chunk_store_mb_s": round(size / 1e6 / work, 1),
            "embed_requests": s["embed_requests"], "embedded_texts": s["embedded"],
            "ceil_texts_over_batch": math.ceil(s["embedded"] / args.batch_size),
            "standin_embed_calls": standin.embed_calls, "peak_rss_mb": round(first["rss_mb"]),
        }  # fmt: skip
        calls = standin.embed_calls
        again = run_child(["ingest", str(corpus), "--json", *batch], env)
        figures["rerun"] = {
            "wall_s": round(again["seconds"], 2),
            "unchanged": again["summary"]["unchanged"],
            "embed_requests": standin.embed_calls - calls,
            "in_ingest_s": again["summary"]["ms"] / 1000,
        }

        small = tmp_path / "small"
        small_corpus(small, args.small_files)
        small_env = {**env, "LOCALGPT_HOME": str(tmp_path / "hs")}
        once = run_child(["ingest", str(small), "--json", *batch], small_env)
        assert once["code"] == 0, once["stderr"]
        calls = standin.embed_calls
        oneshot = run_child(["ingest", str(small), "--json"], small_env)
        figures["small_files_rerun"] = {
            "files": args.small_files,
            "first_ingest_s": round(once["seconds"], 1),
            "in_process_s": round(in_process_rerun(small, tmp_path / "hs", standin.url), 3),
            "one_shot_process_s": round(oneshot["seconds"], 2),
            "embed_requests": standin.embed_calls - calls,
        }

        if args.big_mb:
            big = tmp_path / "big"
            files = int(args.big_mb * 100)  # ~10 KB a file, like the corpus above
            size = generate(big, files, args.big_mb, seed=8)
            down = {**env, "LOCALGPT_HOME": str(tmp_path / "hb"),
                    "OLLAMA_HOST": "http://127.0.0.1:9"}  # fmt: skip
            # --no-fallback: with the [local] extra installed, ingest would otherwise embed
            # the 460k chunks in-process (issue 30), not measure storing without vectors.
            run = run_child(["ingest", str(big), "--json", "--no-fallback"], down)
            bs = run["summary"]
            if run["code"] != 3 or bs.get("fallback") is not False or bs.get("embedded"):
                raise SystemExit(f"benchmark invalid: the unreachable run exited {run['code']}"
                                 f" with embedder {bs.get('embedder')!r}, fallback "
                                 f"{bs.get('fallback')!r}, {bs.get('embedded')} embedded")
            work = (bs["ms"] - bs["embed_ms"] - bs["optimize_ms"]) / 1000
            figures["streaming"] = {
                "files": files, "mb": round(size / 1e6, 1), "chunks": bs["chunks"],
                "wall_s": round(run["seconds"], 1), "optimize_s": bs["optimize_ms"] / 1000,
                "parse_chunk_store_mb_s": round(size / 1e6 / work, 1),
                "peak_rss_mb": round(run["rss_mb"]),
                "pending_embeddings": bs["pending_embeddings"],
            }  # fmt: skip
            if args.big_embed:
                calls = standin.embed_calls
                run = run_child(["ingest", str(big), "--json"],
                                {**env, "LOCALGPT_HOME": str(tmp_path / "he")})  # fmt: skip
                bs = run["summary"]
                assert run["code"] == 0, run["stderr"]
                figures["streaming_embedded"] = {
                    "chunks": bs["chunks"], "wall_s": round(run["seconds"], 1),
                    "embed_wait_s": bs["embed_ms"] / 1000, "optimize_s": bs["optimize_ms"] / 1000,
                    "embed_requests": standin.embed_calls - calls,
                    "ceil_texts_over_batch": math.ceil(bs["embedded"] / args.batch_size),
                    "peak_rss_mb": round(run["rss_mb"]),
                }  # fmt: skip
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for part, values in figures.items():
            print(f"{part}:")
            for key, value in values.items():
                print(f"  {key:<24} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
