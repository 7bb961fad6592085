"""`localgpt ingest -m local:all-minilm-l6-v2` with no server: peak RSS and chunks/s.

    python -m tests.bench.local_ingest [--files 120] [--kb 11] [--chunk-sizes 800,480]

Generated Markdown (tests/bench/ingest.py's prose: `--files` files of ~`--kb` KB; the
defaults make the issue 30 corpus, 1.3 MB, ~3,100 chunks at 800 characters) ingested by a
real `localgpt ingest` process per chunk size, into a fresh home, with OLLAMA_HOST on a
closed port and `-m local:all-minilm-l6-v2`: the in-process embedder, chosen, not fallen
back to. The run fails loudly unless its summary says that embedder ran
(`"embedder": "local:all-minilm-l6-v2", "fallback": false`), every chunk embedded, exit 0.
Peak RSS and CPU seconds are the ingest process's own (getrusage at its exit; it starts no
others): on a loaded machine chunks per CPU-second compare runs better than chunks/s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.ingest import _markdown, run_child

MODEL = "local:all-minilm-l6-v2"


def closed_port() -> str:
    """A URL nothing listens on (bound then released here, so no server can be there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def corpus(root: Path, files: int, kb: float) -> int:
    rng = np.random.default_rng(30)
    root.mkdir(parents=True)
    size = 0
    for i in range(files):
        text = _markdown(rng, int(kb * 1000))
        (root / f"doc{i:04}.md").write_text(text)
        size += len(text.encode())
    return size


def pinned(run: dict[str, Any]) -> dict[str, Any]:
    """The summary of a run that did what this benchmark claims; SystemExit otherwise."""
    s = run["summary"]
    if run["code"] != 0 or s.get("embedder") != MODEL or s.get("fallback") is not False:
        raise SystemExit(f"benchmark invalid: expected {MODEL} chosen (no fallback), exit 0; "
                         f"got exit {run['code']}, embedder {s.get('embedder')!r}, "
                         f"fallback {s.get('fallback')!r}\n{run['stderr']}")
    if s["embedded"] != s["chunks"] or s["pending_embeddings"]:
        raise SystemExit(f"benchmark invalid: {s['embedded']} of {s['chunks']} chunks embedded")
    return s


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.local_ingest",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=120)
    parser.add_argument("--kb", type=float, default=11)
    parser.add_argument("--chunk-sizes", default="800,480")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-local-ingest-") as tmp:
        docs = Path(tmp) / "docs"
        size = corpus(docs, args.files, args.kb)
        for chunk in [int(c) for c in args.chunk_sizes.split(",")]:
            env = {k: v for k, v in os.environ.items()
                   if k not in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_EMBED_MODEL")}
            env.update(OLLAMA_HOST=closed_port(), LOCALGPT_HOME=str(Path(tmp) / f"h{chunk}"))
            run = run_child(["ingest", str(docs), "--json", "-m", MODEL,
                             "--chunk-size", str(chunk)], env)  # fmt: skip
            s = pinned(run)
            print(json.dumps({
                "files": args.files, "mb": round(size / 1e6, 2), "chunk_size": chunk,
                "chunks": s["chunks"], "embedder": s["embedder"], "fallback": s["fallback"],
                "wall_s": round(run["seconds"], 1),
                "chunks_per_s": round(s["chunks"] / run["seconds"], 1),
                "cpu_s": round(run["cpu_s"], 1),
                "chunks_per_cpu_s": round(s["chunks"] / run["cpu_s"], 1),
                "embed_chunks_per_s": round(s["embedded"] / max(s["embed_ms"], 1) * 1000, 1),
                "peak_rss_mb": round(run["rss_mb"]), "load_avg": round(os.getloadavg()[0], 1),
            }), flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
