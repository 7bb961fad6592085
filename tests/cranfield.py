"""The Cranfield collection in `tests/data/cranfield`, read by its SOURCE.md conventions.

Tests and benchmarks read this copy, never `/work/shared`, so a fresh clone can run them.
The conventions are kept exactly because they change the figures: query ids are the
positions 1..225 (also valid document ids, so a hit whose id equals the query id is a
legitimate hit), grades are gains 1..4 (4 best) and every stored grade counts as relevant.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data" / "cranfield"


def load_corpus(data_dir: Path = DATA_DIR) -> list[tuple[str, str, str]]:
    """Every document as `(doc_id, title, text)`, in file order (1,398 documents); another
    collection in the same layout (tests/clickdocs.py) from `data_dir`."""
    docs = []
    with (data_dir / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                docs.append((str(record["_id"]), record["title"], record["text"]))
    return docs


def load_queries() -> list[tuple[str, str]]:
    """Every question as `(query_id, text)` (225 queries, ids "1".."225")."""
    queries = []
    with (DATA_DIR / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                queries.append((str(record["_id"]), record["text"]))
    return queries


def load_qrels() -> dict[str, dict[str, int]]:
    """Judgements as `{query_id: {doc_id: grade}}`; grade is the gain, > 0 means relevant."""
    qrels: dict[str, dict[str, int]] = {}
    with (DATA_DIR / "qrels.tsv").open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            fields = line.rstrip("\n").split("\t")
            if number == 1 and fields[0] == "query-id":
                continue
            if len(fields) != 3:
                raise ValueError(f"{f.name}:{number}: expected 3 tab-separated fields")
            qid, doc_id, score = fields
            qrels.setdefault(qid, {})[doc_id] = int(score)
    return qrels


def document_text(title: str, text: str) -> str:
    """The file body the benchmark ingests for one document: title, blank line, text."""
    return f"{title}\n\n{text}\n"


def write_corpus_files(dest_dir: str | Path, data_dir: Path = DATA_DIR) -> list[Path]:
    """Write one `<doc_id>.txt` per document into `dest_dir`, for `localgpt ingest`.

    The file name stem is the document id, so a qrels `doc` resolves by file name.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc_id, title, text in load_corpus(data_dir):
        path = dest / f"{doc_id}.txt"
        path.write_text(document_text(title, text), encoding="utf-8")
        paths.append(path)
    return paths


def write_slice(folder: Path, queries: list[str]) -> set[str]:
    """The documents judged for `queries` plus as many unjudged ones spread over the
    collection, as files in `folder` (a slice small enough to embed in a test); returns
    the judged ids."""
    qrels = load_qrels()
    wanted = {doc for q in queries for doc in qrels[q]}
    others = [d for d, _, _ in load_corpus() if d not in wanted]
    chosen = wanted | set(others[:: len(others) // len(wanted)][: len(wanted)])
    folder.mkdir()
    for doc_id, title, text in load_corpus():
        if doc_id in chosen:
            (folder / f"{doc_id}.txt").write_text(document_text(title, text))
    return wanted
