"""The answer pipeline's own cost in fast mode, at 10,000 chunks.

    python -m tests.bench.pipeline [--rows 10000] [--queries 50] [--runs 5]

A 10k-chunk collection (384-d Gaussian-mixture vectors and cluster words, as
tests/bench/search.py builds them) is searched in process by today's plain retrieval
(`rag.retrieve.search`, hybrid, k=5, the same dicts `chat_retriever` hands the turn) and
by the fast pipeline around that same retriever (deterministic shaper, the retrieval
stage with its passage ids, the prompt builder's duplicate and budget cuts and sources
block, the `sources` payload). Query vectors are precomputed, so both sides time the
same search and the difference is the pipeline's own work. Rounds alternate the two
sides question by question; the medians per question and their ratio are printed, and
the pipeline's cost alone (the search replayed from memory).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from localgpt_cli.kernel.answer.pipeline import AnswerOptions, Pipeline, build, payload
from localgpt_cli.kernel.answer.prompt import fit_passages, pinned_blocks
from localgpt_cli.kernel.grounding import Retrieved
from localgpt_cli.rag.query import dropped_result, source_result
from localgpt_cli.rag.retrieve import search
from localgpt_cli.rag.store import open_store
from tests.bench.search import centres, dataset, draw, load_collection, text_for

DIM = 384


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.pipeline")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    x, labels = dataset(args.rows, DIM)
    rng = np.random.default_rng(99)
    qvec, qlab = draw(rng, centres(DIM), args.queries)
    texts = [text_for(int(label), rng) for label in qlab]
    vectors = dict(zip(texts, (v.tolist() for v in qvec), strict=True))
    with tempfile.TemporaryDirectory() as tmp:
        coll = open_store(Path(tmp) / "db").collection("bench", create=True, dim=DIM)
        load_collection(coll, x, labels)

        def retriever(query: str) -> Retrieved:
            found = search(coll, query, vectors[query], k=5, mode="hybrid")
            return Retrieved(query, found.mode_used, [source_result(h) for h in found.hits],
                             [dropped_result(d) for d in found.dropped])  # fmt: skip

        pipeline = build(AnswerOptions(pipeline="fast"), retriever, None)
        recorded = {q: retriever(q) for q in texts}  # warms caches and indexes too
        replay = build(AnswerOptions(pipeline="fast"), lambda q: copy.deepcopy(recorded[q]),
                       None)  # fmt: skip

        def plain(q: str) -> float:
            start = time.perf_counter()
            retriever(q)
            return time.perf_counter() - start

        def fast(q: str, which: Pipeline = pipeline) -> float:
            start = time.perf_counter()
            state = which.run(q, ["an earlier question about the same topic"])
            fit_passages(state, [], 6000)
            pinned_blocks("Answer briefly.", [], None, state)
            payload(state, "fast")
            return time.perf_counter() - start

        times: dict[str, list[float]] = {"plain": [], "fast": [], "alone": []}
        for _ in range(args.runs):
            for q in texts:  # alternate per question: load on the machine hits both alike
                times["plain"].append(plain(q))
                times["fast"].append(fast(q))
                times["alone"].append(fast(q, replay))
    p, f, a = (statistics.median(times[k]) * 1000 for k in ("plain", "fast", "alone"))
    print(f"rows {args.rows:,}, {args.queries} questions x {args.runs} rounds (medians)")
    print(f"plain retrieval     {p:8.2f} ms/question")
    print(f"fast pipeline       {f:8.2f} ms/question  (ratio {f / p:.3f}x)")
    print(f"overhead            {f - p:8.2f} ms/question  (target <= 30 ms)")
    print(f"pipeline alone      {a:8.3f} ms/question  (the search replayed from memory)")


if __name__ == "__main__":
    main()
