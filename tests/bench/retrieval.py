"""Retrieval quality on Cranfield with the real all-MiniLM-L6-v2, through the real CLI.

    python -m tests.bench.retrieval                        # ingest, eval, batch speed
    python -m tests.bench.retrieval --chunk-size 1000 --chunk-overlap 150
    python -m tests.bench.retrieval --tune                 # + tokenizer, fusion, threshold,
                                                           #   untitled-chunk comparison

Cranfield (tests/data/cranfield, one file per document: title, blank line, text) is
ingested by `localgpt ingest -m all-minilm` against the Ollama stand-in serving the NumPy
MiniLM (tests/embedder; its disk cache makes a second run cost seconds, a chunk setting
never embedded before costs ~4 minutes on 2 cores). `localgpt eval` then reports nDCG@10,
R@10 and R@100 per mode; batch search speed is `localgpt search --queries` at k=100
(hybrid), compared with one-shot `localgpt search` processes.

`--tune` runs the experiments in process on the same collection, through the same
`document_rankings` and metrics as `eval`: FTS tokenizer options, RRF constant and side
weights, the vector threshold, and chunks embedded without their document's title (as
ingest did before titles, rag/titles.py) for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.cranfield import DATA_DIR, load_queries, write_corpus_files

ROOT = Path(__file__).resolve().parents[2]
QUERIES = DATA_DIR / "queries.jsonl"
QRELS = DATA_DIR / "qrels.tsv"
MODEL = "all-minilm"


def localgpt(env: dict[str, str], *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"localgpt {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, proc


def records(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def metric_table(recs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for r in recs:
        if r["type"] == "metric":
            table.setdefault(r["mode"], {})[r["name"]] = r["value"]
    return table


def print_metrics(label: str, table: dict[str, dict[str, float]]) -> None:
    for mode, m in table.items():
        print(f"  {label:<34} {mode:<8} nDCG@10 {m['ndcg@10']:.4f}  R@10 {m['recall@10']:.4f}  "
              f"R@100 {m['recall@100']:.4f}  MRR@10 {m['mrr@10']:.4f}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-size", type=int)
    parser.add_argument("--chunk-overlap", type=int)
    parser.add_argument("--one-shot", type=int, default=8, help="one-shot search processes")
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR (created) and keep the collection there")
    args = parser.parse_args(argv)

    from tests.embedder import shared_embedder
    from tests.standin import StandIn

    embedder = shared_embedder()
    server = StandIn().start()
    server.set_embedder(f"{MODEL}:latest", embedder.embed)
    try:
        with tempfile.TemporaryDirectory(prefix="cranfield-") as scratch:
            tmp = str(args.keep or scratch)
            corpus = Path(tmp) / "cranfield"
            write_corpus_files(corpus)
            env = {**os.environ, "LOCALGPT_HOME": str(Path(tmp) / "home"),
                   "OLLAMA_HOST": server.url, "LOCALGPT_EMBED_MODEL": MODEL,
                   "XDG_CONFIG_HOME": str(Path(tmp) / "config"),
                   "XDG_CACHE_HOME": str(Path(tmp) / "cache")}  # fmt: skip
            for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_CONFIG"):
                env.pop(var, None)
            run(env, corpus, args, embedder)
    finally:
        server.stop()
    return 0


def run(env: dict[str, str], corpus: Path, args: argparse.Namespace, embedder: Any) -> None:
    chunking = []
    if args.chunk_size:
        chunking += ["--chunk-size", str(args.chunk_size)]
    if args.chunk_overlap is not None:
        chunking += ["--chunk-overlap", str(args.chunk_overlap)]
    from localgpt_cli.rag.chunk import resolve_limits

    size, overlap = resolve_limits("text", args.chunk_size, args.chunk_overlap)
    setting = f"{size}/{overlap}"
    misses = embedder.misses
    seconds, proc = localgpt(env, "ingest", str(corpus), "--json", *chunking)
    summary = records(proc)[-1]
    print(f"ingest ({setting}): {summary['added']} documents, {summary['chunks']} chunks in "
          f"{seconds:.1f} s (embedding {summary['embed_ms'] / 1000:.1f} s, "
          f"{embedder.misses - misses} texts not in the embedding cache)", flush=True)

    seconds, proc = localgpt(env, "eval", "--queries", str(QUERIES), "--qrels", str(QRELS),
                             "--json")  # fmt: skip
    print(f"eval, three modes: {seconds:.1f} s")
    print_metrics(f"chunks {setting}", metric_table(records(proc)))

    queries = load_queries()
    batch, proc = localgpt(env, "search", "--queries", str(QUERIES), "-k", "100", "--json")
    hits = records(proc)
    assert {h["query_id"] for h in hits} == {q for q, _ in queries}
    one_shot = [
        localgpt(env, "search", text, "-k", "100", "--json")[0]
        for _, text in queries[: args.one_shot]
    ]
    print(f"batch hybrid search, k=100: {len(queries)} queries in {batch:.2f} s "
          f"= {len(queries) / batch:.0f} queries/s (process included)", flush=True)
    if one_shot:
        per_query = statistics.median(one_shot)
        print(f"one-shot search process, k=100: {per_query:.2f} s median of {len(one_shot)} "
              f"-> batch is {per_query / (batch / len(queries)):.0f}x faster per query",
              flush=True)
    in_process(env, embedder, queries)
    if args.tune:
        tune(env, embedder, queries)


def open_collection(env: dict[str, str], name: str = "default") -> Any:
    from localgpt_cli.rag.store import open_store

    return open_store(Path(env["LOCALGPT_HOME"]) / "lancedb").collection(name)


def items_for(embedder: Any, queries: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    vectors = embedder.embed_array([text for _, text in queries])  # all-minilm: no prefix
    return [(text, vectors[i]) for i, (_, text) in enumerate(queries)]


def in_process(env: dict[str, str], embedder: Any, queries: list[tuple[str, str]]) -> None:
    from localgpt_cli.rag.retrieve import search_many

    coll = open_collection(env)
    items = items_for(embedder, queries)
    search_many(coll, items[:8], k=100)  # open the table, warm the caches
    start = time.perf_counter()
    search_many(coll, items, k=100)
    seconds = time.perf_counter() - start
    print(f"in process (vectors given), hybrid k=100: {len(items) / seconds:.0f} queries/s")


def evaluate(coll: Any, items: list[tuple[str, Any]], ids: list[str], mode: str,
             **options: Any) -> Any:  # fmt: skip
    from localgpt_cli.cli.eval import document_rankings
    from localgpt_cli.rag.evaluate import DocumentNames, parse_qrels, score_run

    qrels = parse_qrels(QRELS.read_text(), str(QRELS))
    names = DocumentNames((d.document_id, d.path) for d in coll.documents())
    judged = {q: {names.resolve(d) or d: g for d, g in docs.items()}
              for q, docs in qrels.grades.items()}  # fmt: skip
    rankings = document_rankings(coll, items, mode=mode, depth=100, **options)
    return score_run(dict(zip(ids, rankings, strict=True)), judged, 10)


def line(label: str, mode: str, s: Any) -> None:
    print(f"  {label:<34} {mode:<8} nDCG@10 {s.ndcg:.4f}  R@10 {s.recall:.4f}  "
          f"R@100 {s.recall_100:.4f}  MRR@10 {s.mrr:.4f}", flush=True)


def tune(env: dict[str, str], embedder: Any, queries: list[tuple[str, str]]) -> None:
    coll = open_collection(env)
    items = items_for(embedder, queries)
    ids = [q for q, _ in queries]

    print("threshold (vector side):")
    for threshold in (0.0, 0.1, 0.2, 0.3, 0.4):
        for mode in ("vector", "hybrid"):
            line(f"threshold {threshold}", mode, evaluate(coll, items, ids, mode,
                                                          threshold=threshold))
    threshold_figures(coll, embedder, items, ids)
    print("fusion (threshold 0):")
    for rrf_k in (10, 30, 60, 100):
        for vw, kw in ((1.0, 1.0), (1.5, 1.0), (1.0, 1.5)):
            s = evaluate(coll, items, ids, "hybrid", threshold=0.0, rrf_k=rrf_k,
                         vector_weight=vw, keyword_weight=kw)
            line(f"rrf_k {rrf_k} weights v{vw}/k{kw}", "hybrid", s)
    print("full-text tokenizer:")
    for label, options in (
        ("no stemming, no stop words", {"stem": False, "remove_stop_words": False}),
        ("stop words only", {"stem": False, "remove_stop_words": True}),
        ("stemming only", {"stem": True, "remove_stop_words": False}),
        ("stemming + stop words", {}),
    ):
        coll.build_fts_index(**options)
        for mode in ("keyword", "hybrid"):
            line(label, mode, evaluate(coll, items, ids, mode, threshold=0.0))
    coll.build_fts_index()
    untitled_experiment(coll, embedder, items, ids)


# Questions a knowledge base of aeronautics abstracts cannot answer: what a threshold must
# keep out of a chat's context.
OFF_TOPIC = [
    "how do I renew my passport", "best recipe for banana bread",
    "what time does the pharmacy close on sunday", "python list comprehension syntax",
    "who won the football world cup in 2018", "how to reset a wifi router password",
    "symptoms of the common cold", "cheap flights to lisbon in may",
    "how many calories in an apple", "git undo last commit",
    "what is the capital of australia", "tips for a job interview",
]  # fmt: skip


def threshold_figures(coll: Any, embedder: Any, items: list[Any], ids: list[str]) -> None:
    """Where relevant passages and off-topic questions fall on this model's cosine scale."""
    import numpy as np

    from localgpt_cli.rag.evaluate import DocumentNames, parse_qrels
    from localgpt_cli.rag.retrieve import search_many

    qrels = parse_qrels(QRELS.read_text(), str(QRELS))
    names = DocumentNames((d.document_id, d.path) for d in coll.documents())
    best_relevant, top_on = [], []
    results = search_many(coll, items, k=100, mode="vector", threshold=None)
    for qid, result in zip(ids, results, strict=True):
        relevant = {names.resolve(d) for d, g in qrels.grades[qid].items() if g > 0}
        sims = [h.score for h in result.hits if h.document_id in relevant]
        if sims:
            best_relevant.append(max(sims))
        top_on.append(result.hits[0].score)
    off = embedder.embed_array(OFF_TOPIC)
    off_results = search_many(coll, [(t, off[i]) for i, t in enumerate(OFF_TOPIC)], k=1,
                              mode="vector", threshold=None)  # fmt: skip
    top_off = [r.hits[0].score for r in off_results]
    pct = (5, 10, 50)
    print("  best relevant passage per question: "
          + ", ".join(f"p{p} {np.percentile(best_relevant, p):.3f}" for p in pct)
          + f"; top passage per question: min {min(top_on):.3f}")
    print(f"  top passage for {len(OFF_TOPIC)} off-topic questions: median "
          f"{np.median(top_off):.3f}, max {max(top_off):.3f}", flush=True)


def untitled_experiment(coll: Any, embedder: Any, items: list[Any], ids: list[str]) -> None:
    """Every chunk that ingest embedded under its title re-embedded as its bare text (what
    ingest did before titles); the collection is left that way, so this runs last."""
    import numpy as np

    from localgpt_cli.rag.titles import embed_body

    rows = coll.table.to_arrow().select(["chunk_id", "text", "title"]).to_pylist()
    titled = [r for r in rows if embed_body(r["title"], r["text"]) != r["text"]]
    misses = embedder.misses
    vectors = embedder.embed_array([r["text"] for r in titled])
    print(f"without titles: {len(titled)} of {len(rows)} chunks re-embedded as bare text "
          f"({embedder.misses - misses} not cached)")
    coll.set_vectors([r["chunk_id"] for r in titled], np.asarray(vectors))
    for mode in ("vector", "hybrid"):
        line("bare chunk (no title)", mode, evaluate(coll, items, ids, mode, threshold=0.0))


if __name__ == "__main__":
    sys.exit(main())
