"""The in-process embedder (`local:all-minilm-l6-v2`): chunks/s and load time.

Run: python -m tests.bench.local_embedder [--chunks 256] [--runs 3]
Chunks are 450-500 characters of Cranfield text, cut at spaces (what ingest's default
chunking gives for prose). Each run embeds all of them with the product's embedder (batched
by length, one batch per core) and with the tests' reference MiniLM (tests/embedder/, one
text at a time on one BLAS thread), round-robin, so the ratio is measured in one run. Load
is a fresh embedder reading weights and tokenizer (files in the page cache).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from tests.bench.common import interleaved_medians

MODEL = "local:all-minilm-l6-v2"


def sample(count: int) -> list[str]:
    import numpy as np

    from tests.embedder.warm import cranfield_files, word_chunks

    windows = [c for _, body in cranfield_files() for c in word_chunks(body, 500, 0)]
    full = [w for w in windows if len(w) >= 450]
    picked = np.random.default_rng(0).choice(len(full), count, replace=False)
    return [full[i] for i in picked]


def prose(count: int, chars: int) -> list[str]:
    """`count` texts of exactly `chars` characters of the ingest benchmark's generated
    prose (Zipf-distributed words): at 800 characters each is cut at 256 tokens, so 32 of
    them make a full batch."""
    import numpy as np

    from tests.bench.ingest import _prose

    rng = np.random.default_rng(1)
    return [_prose(rng, chars + 100)[:chars] for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from localgpt_cli.llm.local import LocalEmbedder, cores
    from tests.embedder import MiniLM

    texts = sample(args.chunks)
    local = LocalEmbedder()
    reference = MiniLM()
    local.embed_array(MODEL, ["warm up"])
    reference.embed_array(["warm up"])

    def timed(fn: object) -> float:
        start = time.perf_counter()
        fn(texts)  # type: ignore[operator]
        return time.perf_counter() - start

    def load() -> float:
        start = time.perf_counter()
        LocalEmbedder().load(MODEL)
        return time.perf_counter() - start

    seconds = interleaved_medians(
        {
            "local embedder": lambda: timed(lambda t: local.embed_array(MODEL, t)),
            "tests' reference (batch 1)": lambda: timed(reference.embed_array),
            "load": load,
        },
        args.runs,
    )
    result = {
        "chunks": len(texts),
        "avg_chars": sum(map(len, texts)) / len(texts),
        "cores": cores(),
        "load_avg": os.getloadavg()[0],
        "local_chunks_per_s": len(texts) / seconds["local embedder"],
        "reference_chunks_per_s": len(texts) / seconds["tests' reference (batch 1)"],
        "load_s": seconds["load"],
    }
    result["ratio"] = result["local_chunks_per_s"] / result["reference_chunks_per_s"]
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['chunks']} chunks of {result['avg_chars']:.0f} characters on "
          f"{result['cores']} cores (load average {result['load_avg']:.1f}), "
          f"medians of {args.runs} runs:")
    print(f"  local embedder      {result['local_chunks_per_s']:6.1f} chunks/s")
    print(f"  tests' reference    {result['reference_chunks_per_s']:6.1f} chunks/s "
          f"(local is {result['ratio']:.2f}x)")
    print(f"  load                {result['load_s'] * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
