"""The bundled Cranfield copy loads by its SOURCE.md conventions and writes ingestable files."""

from __future__ import annotations

from pathlib import Path

from tests.cranfield import load_corpus, load_qrels, load_queries, write_corpus_files


def test_collection_sizes_and_ids_follow_source_md() -> None:
    corpus = load_corpus()
    queries = load_queries()
    qrels = load_qrels()
    doc_ids = {doc_id for doc_id, _, _ in corpus}
    assert len(corpus) == len(doc_ids) == 1398
    assert "471" not in doc_ids and "995" not in doc_ids  # empty in the source
    assert [qid for qid, _ in queries] == [str(i) for i in range(1, 226)]
    assert set(qrels) == {qid for qid, _ in queries}
    judged = [(doc, grade) for docs in qrels.values() for doc, grade in docs.items()]
    assert len(judged) == 1611
    assert {doc for doc, _ in judged} <= doc_ids
    assert {grade for _, grade in judged} == {1, 2, 3, 4}


def test_write_corpus_files_writes_title_blank_line_text(tmp_path: Path) -> None:
    paths = write_corpus_files(tmp_path / "cranfield")
    assert len(paths) == 1398
    doc_id, title, text = load_corpus()[0]
    body = (tmp_path / "cranfield" / f"{doc_id}.txt").read_text(encoding="utf-8")
    assert body == f"{title}\n\n{text}\n"
    assert body.startswith("experimental investigation of the aerodynamics of a wing")
