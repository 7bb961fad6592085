"""The fast pipeline's own cost at ~10,000 chunks: retriever -> reranker -> gate (and the
answer pipeline around it) against plain hybrid retrieval, on real data.

    python -m tests.bench.pipeline [--keep DIR] [--queries 225] [--runs 3]

The collection is Cranfield's passages stored four times over with their real
all-MiniLM-L6-v2 vectors (10,996 rows, as tests/bench/rerank.py builds it; `--keep DIR`
reuses the ingested collections of either benchmark). Query vectors are computed once,
so every side times the same search (the query `--pipeline fast` searches: the question,
joined with the turn before when the shaper's rule says so). Per question, alternated
(each side first in turn) so machine load and warm caches hit all sides alike:

- plain: `rag.retrieve.search`, hybrid, k=5, no reranker, no gate;
- fast path: the same search with the local reranker and the gate at the default θ,
  as `chat_retriever` runs it;
- fast pipeline: `--pipeline fast` around the fast path (deterministic shaper, the
  retrieval stage with passage ids, the prompt builder's duplicate and budget cuts and
  sources block, the `sources` payload): what a chat turn pays before the model.

Medians per question are printed, with the overhead over plain (target <= 30 ms) and the
pipeline stages alone (the search replayed from memory).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localgpt_cli.kernel.answer.pipeline import AnswerOptions, Pipeline, build, payload
from localgpt_cli.kernel.answer.prompt import fit_passages, pinned_blocks
from localgpt_cli.kernel.grounding import Retrieved
from localgpt_cli.rag.gate import DEFAULT_THETA, scale_for
from localgpt_cli.rag.query import dropped_result, source_result
from localgpt_cli.rag.retrieve import search
from tests.bench.labelled import build as ingest
from tests.bench.labelled import environment, open_collection, served_model
from tests.bench.rerank import THRESHOLD, labelled, ten_k

PREVIOUS = ["an earlier question about the same topic"]  # the turn before each question


def retriever(coll: Any, vectors: dict[str, Any], **options: Any) -> Callable[[str], Retrieved]:
    """A chat turn's retriever over `coll` with the query vectors precomputed."""

    def retrieve(query: str) -> Retrieved:
        found = search(coll, query, vectors[query], k=5, mode="hybrid", threshold=THRESHOLD,
                       **options)  # fmt: skip
        return Retrieved(query, found.mode_used, [source_result(h) for h in found.hits],
                         [dropped_result(d) for d in found.dropped])  # fmt: skip

    return retrieve


def shaped(question: str) -> str:
    """What `--pipeline fast` searches for `question` after PREVIOUS (the shaper joins a
    short or anaphoric question with the previous turn)."""
    from localgpt_cli.kernel.answer.shaper import fallback_query

    return fallback_query(question, PREVIOUS)


def measure(coll: Any, items: list[tuple[str, Any]], vectors: dict[str, Any],
            runs: int) -> dict[str, float]:  # fmt: skip
    """Median milliseconds per question of each side, and the share of questions whose
    passages the gate all dropped. `vectors` holds the shaped queries' vectors too."""
    texts = [text for text, _ in items]
    plain = retriever(coll, vectors)
    fast = retriever(coll, vectors, rerank="local", theta=DEFAULT_THETA,
                     gate_scale=scale_for("all-minilm", THRESHOLD))  # fmt: skip
    pipeline = build(AnswerOptions(pipeline="fast"), fast, None)
    recorded = {shaped(q): fast(shaped(q)) for q in texts}  # warms caches and indexes too
    replay = build(AnswerOptions(pipeline="fast"), lambda q: copy.deepcopy(recorded[q]),
                   None)  # fmt: skip

    def timed(fn: Callable[[str], object], q: str) -> float:
        start = time.perf_counter()
        fn(q)
        return time.perf_counter() - start

    def turn(q: str, which: Pipeline) -> None:
        state = which.run(q, PREVIOUS)
        if state.failures:  # e.g. a shaped query with no vector: it would time nothing
            raise RuntimeError("; ".join(state.failures))
        fit_passages(state, [], 6000)
        pinned_blocks("Answer briefly.", [], None, state)
        payload(state, "fast")

    sides: dict[str, Callable[[str], object]] = {
        "plain": lambda q: plain(shaped(q)), "fast path": lambda q: fast(shaped(q)),
        "fast pipeline": lambda q: turn(q, pipeline),
        "stages alone": lambda q: turn(q, replay)}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for _ in range(runs):
        for i, q in enumerate(texts):  # each side goes first in turn: no order effect
            for name in names[i % len(names):] + names[: i % len(names)]:
                times[name].append(timed(sides[name], q))
    out = {name: 1000 * statistics.median(t) for name, t in times.items()}
    out["nothing kept"] = sum(not r.results for r in recorded.values()) / len(recorded)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.pipeline")
    parser.add_argument("--keep", type=Path, metavar="DIR")
    parser.add_argument("--queries", type=int, default=225)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with served_model() as (url, embedder), tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        ingest("cranfield", work, environment(work, url))
        _, items, _ = labelled("cranfield", embedder)
        items = items[: args.queries]
        vectors = {text: vector for text, vector in items}
        extra = sorted({shaped(t) for t, _ in items} - set(vectors))
        vectors |= dict(zip(extra, embedder.embed_array(extra), strict=True))
        coll = ten_k(work, open_collection(work, "cranfield"))
        # Measured inside the block: its temporary folder holds the collection's files.
        ms = measure(coll, items, vectors, args.runs)
        count = coll.count()
    print(f"the shaper joined {len(extra)} of {len(items)} questions with the turn before")
    p = ms["plain"]
    print(f"{count:,} passages (Cranfield x4, real MiniLM vectors), k=5, "
          f"{len(items)} questions x {args.runs} rounds (medians), θ={DEFAULT_THETA}")
    print(f"plain hybrid retrieval   {p:8.2f} ms/question")
    for name in ("fast path", "fast pipeline"):
        print(f"{name:<24} {ms[name]:8.2f} ms/question  overhead {ms[name] - p:+.2f} ms "
              f"({ms[name] / p:.2f}x; target <= 30 ms)")
    print(f"pipeline stages alone    {ms['stages alone']:8.3f} ms/question (search replayed)")
    print(f"questions the gate left with no passage: {ms['nothing kept']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
