"""A second labelled collection, of another domain than Cranfield: click's API reference.

`tests/data/clickdocs/corpus.jsonl` is 138 documents, one per public click function,
class or method, made from the docstrings of click 8.x by `make_corpus.py` beside it
(click is BSD-3-Clause). `queries.jsonl` is 51 questions written for this repo in a
user's words (not the docstrings'), and `qrels.tsv` judges them by hand: 2 = the document
that answers it, 1 = one that helps. The reranker and the gate are checked here so that
nothing is tuned to Cranfield alone; Cranfield's queries asked of this collection are the
gate's off-topic test.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data" / "clickdocs"


def load_corpus() -> list[tuple[str, str, str]]:
    """Every document as `(doc_id, title, text)`, in file order."""
    docs = []
    with (DATA_DIR / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                docs.append((record["_id"], record["title"], record["text"]))
    return docs


def write_corpus_files(dest_dir: str | Path) -> list[Path]:
    """One `<doc_id>.txt` per document (title, blank line, docstring) for `localgpt ingest`;
    the stem is the dotted name the qrels use."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc_id, title, text in load_corpus():
        path = dest / f"{doc_id}.txt"
        path.write_text(f"{title}\n\n{text}\n", encoding="utf-8")
        paths.append(path)
    return paths
