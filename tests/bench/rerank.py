"""The fast path (retriever -> reranker -> gate) on real data with the real all-MiniLM-L6-v2.

    python -m tests.bench.rerank [--keep DIR]      # nDCG table, gate rates, overhead

Ingests Cranfield and click's API reference (tests/clickdocs.py) through `localgpt
ingest` against the stand-in serving the NumPy MiniLM (cached vectors: a second run
costs seconds; `--keep DIR` keeps the collections for the next run), then prints:

- nDCG@10 / R@100 of hybrid search with the reranker's parts added one at a time (none,
  combine, + documents, + title = the default), on both collections, through the same
  `document_rankings` as `localgpt eval`;
- the gate's rates at the default θ: on-topic (Cranfield and click: relevant passages of
  the top 5 kept, non-relevant dropped) and off-topic (each collection's questions asked
  of the other: share of questions with nothing kept);
- the fast path's overhead per question at 10k chunks (Cranfield's passages stored four
  times over, with their real vectors): median of one `search` at k=5 with and without
  the reranker and gate, interleaved, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.labelled import (
    COLLECTIONS,
    build,
    data_dir,
    environment,
    open_collection,
    served_model,
)

PARTS = {"none": (), "combine": ("combine",), "+ documents": ("combine", "documents"),
         "+ title (default)": ("combine", "documents", "title")}  # fmt: skip
THRESHOLD = 0.3  # the default --threshold for all-minilm (rag/retrieve.py)


def labelled(name: str, embedder: Any) -> tuple[list[str], list[tuple[str, Any]], Any]:
    """(query ids, (text, vector) per query, qrels) of a collection's questions."""
    import json

    from localgpt_cli.rag.evaluate import parse_qrels

    folder = data_dir(name)
    queries = [json.loads(line) for line in (folder / "queries.jsonl").open() if line.strip()]
    vectors = embedder.embed_array([q["text"] for q in queries])
    items = [(q["text"], vectors[i]) for i, q in enumerate(queries)]
    qrels = parse_qrels((folder / "qrels.tsv").read_text(), str(folder / "qrels.tsv"))
    return [str(q["_id"]) for q in queries], items, qrels


def judged(coll: Any, qrels: Any) -> dict[str, dict[str, int]]:
    from localgpt_cli.rag.evaluate import DocumentNames

    names = DocumentNames((d.document_id, d.path) for d in coll.documents())
    return {q: {names.resolve(d) or d: g for d, g in docs.items()}
            for q, docs in qrels.grades.items()}  # fmt: skip


def ndcg_table(coll: Any, ids: list[str], items: list[Any], judgements: Any) -> dict[str, Any]:
    from localgpt_cli.cli.eval import document_rankings
    from localgpt_cli.rag.evaluate import score_run

    out = {}
    for label, parts in PARTS.items():
        options = {"rerank": "local", "parts": parts} if parts else {}
        rankings = document_rankings(coll, items, mode="hybrid", depth=100,
                                     threshold=THRESHOLD, **options)  # fmt: skip
        out[label] = score_run(dict(zip(ids, rankings, strict=True)), judgements, 10)
    return out


def gate_rates(coll: Any, ids: list[str], items: list[Any], judgements: Any | None,
               theta: float) -> dict[str, float]:  # fmt: skip
    """On-topic (judgements given): shares of the top 5's relevant passages kept and of
    its non-relevant ones dropped. Off-topic (None): share of questions with nothing kept."""
    from localgpt_cli.rag.gate import scale_for
    from localgpt_cli.rag.retrieve import search_many

    common = {"k": 5, "mode": "hybrid", "threshold": THRESHOLD, "rerank": "local",
              "gate_scale": scale_for("all-minilm", THRESHOLD)}  # fmt: skip
    before = search_many(coll, items, theta=None, **common)
    after = search_many(coll, items, theta=theta, **common)
    if judgements is None:
        empty = sum(1 for r in after if not r.hits)
        return {"nothing_kept": empty / len(after), "questions": len(after)}
    kept_rel = total_rel = dropped_non = total_non = 0
    for qid, b, a in zip(ids, before, after, strict=True):
        relevant = {d for d, g in judgements.get(qid, {}).items() if g > 0}
        kept = {h.extra["chunk_id"] for h in a.hits}
        for h in b.hits:
            if h.document_id in relevant:
                total_rel += 1
                kept_rel += h.extra["chunk_id"] in kept
            else:
                total_non += 1
                dropped_non += h.extra["chunk_id"] not in kept
    return {"relevant_kept": kept_rel / max(total_rel, 1),
            "non_relevant_dropped": dropped_non / max(total_non, 1),
            "relevant": total_rel, "non_relevant": total_non}  # fmt: skip


def ten_k(work: Path, source: Any) -> Any:
    """A collection of ~11k passages: the source's passages four times over (vectors too)."""
    import numpy as np

    from localgpt_cli.rag.store import open_store
    from localgpt_cli.rag.store.rows import row_chunk

    coll = open_store(work / "home" / "lancedb").collection("tenk", create=True, dim=source.dim)
    if coll.count() > 0:
        return coll
    columns = ["document_id", "path", "type", "ordinal", "text", "page", "heading",
               "line_start", "line_end", "title", "vector"]  # fmt: skip
    rows = source.table.to_arrow().select(columns).to_pylist()
    for copy in range(4):
        chunks = []
        for r in rows:
            chunk = row_chunk(r)
            chunk.document_id = f"{copy}-{chunk.document_id}"
            chunk.path = f"copy{copy}/{chunk.path}"
            chunks.append(chunk)
        vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
        coll.write_documents(sorted({c.document_id for c in chunks}), chunks, vectors,
                             append=True)  # fmt: skip
    coll.build_fts_index()
    return coll


def overhead(coll: Any, items: list[Any], theta: float) -> dict[str, float]:
    from localgpt_cli.rag.gate import scale_for
    from localgpt_cli.rag.retrieve import search

    scale = scale_for("all-minilm", THRESHOLD)
    cases = {"plain": {}, "fast path": {"rerank": "local", "theta": theta, "gate_scale": scale}}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for text, vector in items[:10]:  # warm the table and caches
        search(coll, text, vector, k=5, threshold=THRESHOLD)
    for text, vector in items:
        for name, options in cases.items():
            start = time.perf_counter()
            search(coll, text, vector, k=5, threshold=THRESHOLD, **options)
            times[name].append(time.perf_counter() - start)
    out = {name: 1000 * statistics.median(t) for name, t in times.items()}
    out["overhead"] = out["fast path"] - out["plain"]
    out["ratio"] = out["fast path"] / out["plain"]
    out["rows"] = coll.count()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR")
    parser.add_argument("--theta", type=float, default=None)
    args = parser.parse_args(argv)
    from localgpt_cli.rag.gate import DEFAULT_THETA

    theta = DEFAULT_THETA if args.theta is None else args.theta
    with served_model() as (url, embedder), tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        env = environment(work, url)
        colls, labels = {}, {}
        for name in COLLECTIONS:
            build(name, work, env)
            colls[name] = open_collection(work, name)
            labels[name] = labelled(name, embedder)
        report(colls, labels, theta)
        print(f"fast-path overhead, k=5, one question at a time (θ={theta}):")
        figures = overhead(ten_k(work, colls["cranfield"]), labels["cranfield"][1], theta)
        print(f"  {figures['rows']} passages: plain {figures['plain']:.1f} ms, fast path "
              f"{figures['fast path']:.1f} ms -> +{figures['overhead']:.1f} ms "
              f"({figures['ratio']:.2f}x), medians of {len(labels['cranfield'][1])}")
    return 0


def report(colls: dict[str, Any], labels: dict[str, Any], theta: float) -> None:
    for name in COLLECTIONS:
        ids, items, qrels = labels[name]
        print(f"{name} ({len(ids)} questions), hybrid + reranker parts:")
        for label, s in ndcg_table(colls[name], ids, items, judged(colls[name], qrels)).items():
            print(f"  {label:<20} nDCG@10 {s.ndcg:.4f}  R@10 {s.recall:.4f}  "
                  f"R@100 {s.recall_100:.4f}", flush=True)
    print(f"gate at θ={theta}:")
    for name in COLLECTIONS:
        ids, items, qrels = labels[name]
        on = gate_rates(colls[name], ids, items, judged(colls[name], qrels), theta)
        print(f"  on-topic {name}: relevant kept {on['relevant_kept']:.3f} (of "
              f"{on['relevant']}), non-relevant dropped {on['non_relevant_dropped']:.3f} "
              f"(of {on['non_relevant']})")
        other = next(n for n in COLLECTIONS if n != name)
        off = gate_rates(colls[other], ids, items, None, theta)
        print(f"  off-topic {name} questions asked of {other}: nothing kept for "
              f"{off['nothing_kept']:.3f} of {off['questions']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
