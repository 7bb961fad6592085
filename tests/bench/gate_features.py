"""Can per-query relative features tell relevant from non-relevant passages of the top 5?

    python -m tests.bench.gate_features [--keep DIR]

The gate's open figure (issue 15): on Cranfield, drop >= 40% of the non-relevant passages
that reach the top 5 while keeping >= 90% of the relevant ones. The fast path's absolute
scores do not separate them (similarity AUC 0.56), so this tries features relative to the
query's own results: rank, gap to the best passage's similarity / BM25 / rerank score, the
agreement of the vector and keyword ranks, the document's other passages among the first
40, and the query-term coverage of the passage weighted by IDF from the collection itself.

For each collection (Cranfield and click's API reference, real all-MiniLM-L6-v2, as
tests/bench/rerank.py builds them) the questions are split in two halves (even and odd
positions in the file): a logistic regression is fitted on one half, its cut set to keep
90% of that half's relevant passages, and the rates are measured on the other half; then
the halves swap. It prints each single feature's AUC, the held-out rates, and the curve
(share of non-relevant dropped at 95/90/85/80% of relevant kept) on the held-out half.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.labelled import COLLECTIONS, build, environment, open_collection, served_model
from tests.bench.rerank import THRESHOLD, judged, labelled

FEATURES = ("similarity", "sim_gap", "bm25_rel", "rerank_rel", "rank", "vector_rank",
            "keyword_rank", "rank_gap", "both_sides", "doc_passages", "idf_coverage",
            "coverage", "centrality", "to_best", "centrality_10", "centrality_20",
            "rocchio")  # fmt: skip


def idf_table(coll: Any) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """IDF of each stemmed term over the collection's passages (BM25's idf), and each
    passage's vector by chunk id."""
    from localgpt_cli.rag.rerank import terms

    rows = coll.table.to_arrow().select(["chunk_id", "text", "title", "vector"]).to_pylist()
    df: Counter[str] = Counter()
    for r in rows:
        df.update(terms(f"{r['title'] or ''} {r['text']}"))
    n = len(rows)
    vectors = {r["chunk_id"]: np.asarray(r["vector"], dtype=float) for r in rows}
    return {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}, vectors


def features(hits: list[Any], wide: list[Any], query: tuple[str, Any], idf: dict[str, float],
             vectors: dict[str, np.ndarray]) -> list[list[float]]:  # fmt: skip
    """One feature row per hit of the top 5 (order of FEATURES)."""
    from localgpt_cli.rag.rerank import terms

    words = terms(query[0])
    qv = np.asarray(query[1], dtype=float)
    qv /= np.linalg.norm(qv) or 1.0
    weights = {w: idf.get(w, max(idf.values())) for w in words}
    total = sum(weights.values()) or 1.0
    sims = [h.extra.get("similarity") for h in hits]
    best_sim = max((s for s in sims if s is not None), default=0.0)
    bm = [h.extra.get("bm25") or 0.0 for h in hits]
    best_bm = max(bm) or 1.0
    best_rr = max(h.score for h in hits) or 1.0
    docs = Counter(h.document_id for h in wide)
    vecs = [vectors[h.extra["chunk_id"]] for h in hits]
    centre = np.mean(vecs, axis=0)
    c10 = np.mean([vectors[h.extra["chunk_id"]] for h in wide[:10]], axis=0)
    c20 = np.mean([vectors[h.extra["chunk_id"]] for h in wide[:20]], axis=0)
    rocchio = qv + c10 / (np.linalg.norm(c10) or 1.0)
    out = []
    for i, h in enumerate(hits):
        sim = h.extra.get("similarity")
        sim = min(s for s in sims if s is not None) if sim is None else sim
        vr = h.extra.get("vector_rank") or 101
        kr = h.extra.get("keyword_rank") or 101
        found = words & terms(f"{h.heading or ''} {h.text}")
        out.append([sim, best_sim - sim, bm[i] / best_bm, h.score / best_rr, i + 1,
                    math.log(vr), math.log(kr), abs(math.log(vr) - math.log(kr)),
                    float(vr <= 100 and kr <= 100), docs[h.document_id],
                    sum(weights[w] for w in found) / total,
                    len(found) / max(len(words), 1), float(vecs[i] @ centre),
                    float(vecs[i] @ vecs[0]), float(vecs[i] @ c10), float(vecs[i] @ c20),
                    float(vecs[i] @ rocchio)])  # fmt: skip
    return out


def collect(coll: Any, ids: list[str], items: list[Any], judgements: Any,
            tables: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(features, relevant?, query index) for every top-5 passage after the reranker."""
    from localgpt_cli.rag.retrieve import search_many

    common: dict[str, Any] = {"mode": "hybrid", "threshold": THRESHOLD, "rerank": "local",
                              "theta": None}  # fmt: skip
    top = search_many(coll, items, k=5, **common)
    wide = search_many(coll, items, k=40, **common)
    xs, ys, qs = [], [], []
    for qi, (qid, res, big, item) in enumerate(zip(ids, top, wide, items, strict=True)):
        relevant = {d for d, g in judgements.get(qid, {}).items() if g > 0}
        for row, h in zip(features(res.hits, big.hits, item, *tables), res.hits, strict=True):
            xs.append(row)
            ys.append(h.document_id in relevant)
            qs.append(qi)
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=bool), np.asarray(qs)


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Probability that a relevant passage scores above a non-relevant one (ties: half)."""
    pos, neg = score[y], score[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    return float(greater + 0.5 * (pos[:, None] == neg[None, :]).mean())


def fit(x: np.ndarray, y: np.ndarray, steps: int = 3000) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:  # fmt: skip
    """A standardised, L2-regularised logistic regression: (mean, std, weights)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.1 * (z.T @ (p - y) / len(y) + 0.01 * w)
    return mu, sd, w


def predict(model: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    mu, sd, w = model
    return np.hstack([(x - mu) / sd, np.ones((len(x), 1))]) @ w


def cut_for(score: np.ndarray, y: np.ndarray, keep: float) -> float:
    """The score cut that keeps `keep` of the relevant passages."""
    return float(np.quantile(score[y], 1 - keep))


def rates(score: np.ndarray, y: np.ndarray, cut: float) -> tuple[float, float]:
    kept = score >= cut
    return float(kept[y].mean()), float((~kept[~y]).mean())


def study(name: str, x: np.ndarray, y: np.ndarray, q: np.ndarray) -> None:
    print(f"{name}: {int(y.sum())} relevant, {int((~y).sum())} non-relevant top-5 passages")
    print("  single-feature AUC: " + ", ".join(
        f"{f} {max(auc(x[:, i], y), 1 - auc(x[:, i], y)):.2f}" for i, f in enumerate(FEATURES)))
    for half in (0, 1):
        train, test = q % 2 == half, q % 2 != half
        model = fit(x[train], y[train])
        s_train, s_test = predict(model, x[train]), predict(model, x[test])
        cut = cut_for(s_train, y[train], 0.90)
        kept, dropped = rates(s_test, y[test], cut)
        at = {k: rates(s_test, y[test], cut_for(s_test, y[test], k))[1]
              for k in (0.95, 0.90, 0.85, 0.80)}  # fmt: skip
        curve = ", ".join(f"{int(k * 100)}%->{d:.2f}" for k, d in at.items())
        print(f"  fit on half {half}, held-out: AUC {auc(s_test, y[test]):.3f}; cut for 90% "
              f"kept on the fit half -> relevant kept {kept:.3f}, non-relevant dropped "
              f"{dropped:.3f}; held-out curve (relevant kept -> dropped) {curve}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR")
    args = parser.parse_args(argv)
    with served_model() as (url, embedder), tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        env = environment(work, url)
        data = {}
        for name in COLLECTIONS:
            build(name, work, env)
            coll = open_collection(work, name)
            ids, items, qrels = labelled(name, embedder)
            data[name] = collect(coll, ids, items, judged(coll, qrels), idf_table(coll))
            study(name, *data[name])
        (xc, yc, _), (xk, yk, _) = data["cranfield"], data["clickdocs"]
        model = fit(xc, yc)
        cut = cut_for(predict(model, xc), yc, 0.90)
        kept, dropped = rates(predict(model, xk), yk, cut)
        print(f"transfer: fit on all Cranfield, cut at 90% kept there, on click's docs: "
              f"relevant kept {kept:.3f}, non-relevant dropped {dropped:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
