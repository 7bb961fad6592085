"""Retrieval quality against relevance judgements: qrels, document names, metrics.

Pure code (no store, no model): `localgpt eval` feeds it rankings and the benchmark feeds it
the same, so the figures in the README and those a user gets on their own data are computed
one way. The conventions are trec_eval's and the Cranfield SOURCE.md's:

- judgements name documents, a RAG index returns chunks: a document ranks where its best
  chunk ranks (`document_ranking`), then the list is cut to k;
- nDCG@k uses the grade as a linear gain and a log2(rank + 1) discount, and its ideal
  ranking is built from every judged document of the query (not only those retrieved);
- a grade > 0 is relevant; queries without any relevant judgement are not scored (they
  would be 0/0), every other query counts, including those with no hit at all (0).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from localgpt_cli.errors import InvalidInput

Judgements = dict[str, dict[str, int]]  # query id -> {document name: grade}
# What a header's columns may be called (compared lower-case, without `-`, `_` and spaces):
# BEIR's `query-id corpus-id score`, `query_id doc_id relevance`, TREC-like `qid docno rel`.
# A first line is a header only when every column has one of these names: a judgement
# with a typo in its grade must be an error, not a header silently dropped.
_HEADER_NAMES = (
    {"queryid", "qid", "query", "topic", "topicid", "question", "questionid"},
    {"corpusid", "docid", "doc", "document", "documentid", "docno", "path", "file", "name"},
    {"score", "grade", "relevance", "rel", "label", "judgement", "judgment", "gain"},
)
_ITERATION_NAMES = {"iteration", "iter", "q0", "0"}


@dataclass(frozen=True)
class Qrels:
    """Parsed judgements and the line each (query, document) pair came from."""

    grades: Judgements
    lines: dict[tuple[str, str], int]


def _is_header(fields: list[str]) -> bool:
    """Whether a first line names the columns (see `_HEADER_NAMES`), in 3 or 4 columns."""
    names = [f.strip().lower().replace("-", "").replace("_", "").replace(" ", "") for f in fields]
    if len(names) == 4 and names[1] in _ITERATION_NAMES:
        names = [names[0], names[2], names[3]]
    if len(names) != 3:
        return False
    return all(n in known for n, known in zip(names, _HEADER_NAMES, strict=True))


def parse_qrels(text: str, source: str) -> Qrels:
    """TSV `query-id <tab> doc <tab> grade` (a header line naming the columns is allowed first).

    TREC's four-column form `query-id iteration doc grade` (spaces or tabs) is read too,
    since most published qrels use it. A line that fits neither is InvalidInput naming it.
    """
    grades: Judgements = {}
    lines: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.rstrip("\r\n").split("\t")
        if len(fields) not in (3, 4):
            fields = raw.split()
        if not grades and _is_header(fields):
            continue
        if len(fields) == 4:
            fields = [fields[0], fields[2], fields[3]]
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise InvalidInput(
                f"{source}:{number}: expected 'query-id<TAB>doc<TAB>grade', "
                f"got {raw.strip()[:80]!r}."
            )
        qid, doc, grade_text = (f.strip() for f in fields)
        try:
            grade = int(grade_text)
        except ValueError:
            raise InvalidInput(
                f"{source}:{number}: the grade {grade_text!r} is not an integer.",
                hint=None if grades else "A header line names its columns: "
                "query-id<TAB>doc<TAB>score (or corpus-id, grade, relevance ...).",
            ) from None
        if (qid, doc) in lines:
            raise InvalidInput(
                f"{source}:{number}: query {qid!r} judges {doc!r} again "
                f"(first on line {lines[qid, doc]})."
            )
        grades.setdefault(qid, {})[doc] = grade
        lines[qid, doc] = number
    if not lines:
        raise InvalidInput(f"{source}: no judgements (expected query-id, doc, grade per line).")
    return Qrels(grades, lines)


class DocumentNames:
    """Resolves the names qrels use for documents to stored document ids.

    A name may be the stored path, any trailing part of it (`notes/vpn.md`, a path relative
    to wherever the files were ingested from), and either of those without the file's
    extension (`vpn`, `notes/vpn`). A name that fits two documents is refused rather than
    guessed, so a judgement never silently scores the wrong file.
    """

    def __init__(self, documents: Iterable[tuple[str, str]]) -> None:
        self._by_key: dict[str, set[str]] = {}
        for document_id, path in documents:
            for key in _keys(path):
                self._by_key.setdefault(key, set()).add(document_id)

    def resolve(self, name: str) -> str | None:
        """The document id `name` means; None if none; InvalidInput if ambiguous."""
        found = self._by_key.get(_normalise(name))
        if not found:
            return None
        if len(found) > 1:
            raise InvalidInput(
                f"The document name {name!r} fits {len(found)} stored documents.",
                hint="Name it by a longer part of its path in the qrels file.",
            )
        return next(iter(found))


def _normalise(name: str) -> str:
    name = name.strip().replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    return name


def _keys(path: str) -> set[str]:
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    keys = {path}
    for i in range(len(parts)):
        suffix = "/".join(parts[i:])
        keys.add(suffix)
        stem = os.path.splitext(suffix)[0]
        if stem and not stem.endswith("/"):
            keys.add(stem)
    return keys


def document_ranking(document_ids: Iterable[str]) -> list[str]:
    """Chunk results as documents: each document at the rank of its best chunk."""
    return list(dict.fromkeys(document_ids))


def ndcg(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """nDCG@k with linear gains; the ideal uses every judged document of the query."""
    ideal_gains = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    if ideal == 0:
        return 0.0
    dcg = sum(
        max(grades.get(doc, 0), 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k])
    )
    return dcg / ideal


def recall(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Relevant documents in the top k over all relevant documents of the query."""
    relevant = {d for d, g in grades.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def reciprocal_rank(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """1 / rank of the first relevant document in the top k (0 if none)."""
    for i, doc in enumerate(ranking[:k]):
        if grades.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(frozen=True)
class Scores:
    """Mean metrics of one run over the scored queries."""

    k: int
    queries: int
    ndcg: float
    recall: float
    recall_100: float
    mrr: float
    no_relevant: int  # queries with no relevant document in the top k

    def named(self) -> dict[str, float | int]:
        """Metric name -> value, the names `eval` prints (`ndcg@10`, `recall@100`, ...)."""
        out: dict[str, float | int] = {
            f"ndcg@{self.k}": self.ndcg,
            f"recall@{self.k}": self.recall,
            "recall@100": self.recall_100,
            f"mrr@{self.k}": self.mrr,
            f"no_relevant@{self.k}": self.no_relevant,
        }
        return out


def score_run(
    rankings: Mapping[str, Sequence[str]], judgements: Mapping[str, Mapping[str, int]], k: int
) -> Scores:
    """Mean nDCG@k, recall@k, recall@100 and MRR@k over every judged query with at least
    one relevant document; a query missing from `rankings` counts as an empty ranking."""
    scored = [q for q, g in judgements.items() if any(v > 0 for v in g.values())]
    if not scored:
        raise InvalidInput("No query has a relevant judgement (grade > 0): nothing to score.")
    totals = [0.0, 0.0, 0.0, 0.0]
    missed = 0
    for qid in scored:
        ranking, grades = rankings.get(qid, ()), judgements[qid]
        rr = reciprocal_rank(ranking, grades, k)
        totals[0] += ndcg(ranking, grades, k)
        totals[1] += recall(ranking, grades, k)
        totals[2] += recall(ranking, grades, 100)
        totals[3] += rr
        missed += rr == 0.0
    n = len(scored)
    return Scores(k, n, totals[0] / n, totals[1] / n, totals[2] / n, totals[3] / n, missed)
