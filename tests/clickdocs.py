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

from pathlib import Path

from tests import cranfield

DATA_DIR = Path(__file__).resolve().parent / "data" / "clickdocs"


def write_corpus_files(dest_dir: str | Path) -> list[Path]:
    """One `<doc_id>.txt` per document (title, blank line, docstring) for `localgpt ingest`,
    as Cranfield's are written; the stem is the dotted name the qrels use."""
    return cranfield.write_corpus_files(dest_dir, DATA_DIR)
