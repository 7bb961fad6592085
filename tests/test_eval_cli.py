"""`localgpt eval`: figures from a labelled corpus, and clear errors for bad inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.kb import make_corpus

QUERIES = (
    '{"id": "q1", "text": "wireguard"}\n'
    '{"id": "q2", "text": "passport renewal"}\n'
    '{"id": "q3", "text": "xylophonist"}\n'
    '{"id": "q4", "text": "unjudged"}\n'
)
QRELS = "query-id\tdoc\tscore\nq1\tvpn\t2\nq2\tnotes/todo.txt\t1\nq3\tmanual\t1\nq1\ttodo\t0\n"


@pytest.fixture
def labelled(standin, tmp_path: Path) -> tuple[Path, Path]:
    notes = make_corpus(tmp_path / "corpus")
    assert invoke("ingest", str(notes)).exit_code == 0
    queries, qrels = tmp_path / "q.jsonl", tmp_path / "qrels.tsv"
    queries.write_text(QUERIES)
    qrels.write_text(QRELS)
    return queries, qrels


def metrics(records: list[dict]) -> dict[tuple[str, str], float]:
    assert all(r["type"] == "metric" for r in records)
    return {(r["mode"], r["name"]): r["value"] for r in records}


def test_keyword_figures_by_hand(labelled):
    queries, qrels = labelled
    r = invoke("eval", "--queries", str(queries), "--qrels", str(qrels), "--mode", "keyword",
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    m = metrics(r.records())
    # q1 and q2 find their document first; q3's word is in no document; q4 is not judged
    assert m["keyword", "ndcg@10"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["keyword", "recall@10"] == m["keyword", "recall@100"] == pytest.approx(0.6667)
    assert m["keyword", "mrr@10"] == pytest.approx(0.6667)
    assert m["keyword", "no_relevant@10"] == 1
    assert {rec["queries"] for rec in r.records()} == {3}
    assert "1 of 4 queries have no relevant judgement" in r.stderr


def test_all_modes_by_default_and_plain_table(labelled):
    queries, qrels = labelled
    r = invoke("eval", "--queries", str(queries), "--qrels", str(qrels), "-k", "1")
    assert r.exit_code == 0, r.stderr
    lines = [line.split("\t") for line in r.stdout.splitlines()]
    assert lines[0][:6] == ["mode", "nDCG@1", "R@1", "R@100", "MRR@1", "none@1"]
    assert [row[0] for row in lines[1:]] == ["keyword", "vector", "hybrid"]
    assert all(0.0 <= float(v) <= 1.0 for row in lines[1:] for v in row[1:5])


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("q1\tnowhere\t1\n", r"qrels.tsv:1: no document in collection 'default' is named "
                             r"'nowhere'"),
        ("q1\tvpn\t1\nq9\tvpn\t1\n", r"qrels.tsv:2: query id 'q9' is not in"),
        ("query-id\tdoc\tscore\n", r"qrels.tsv: no judgements"),  # a header alone
        ("q1\tvpn\tvery\nq2\ttodo\t1\n", r"qrels.tsv:1: the grade 'very' is not an "
                                      r"integer\. A header line names its columns"),
        ("q1\tvpn\t1\nq2 todo\n", r"qrels.tsv:2: expected"),
    ],
)
def test_bad_qrels_exit_6(labelled, qrels, message):
    queries, path = labelled
    path.write_text(qrels)
    r = invoke("eval", "--queries", str(queries), "--qrels", str(path))
    assert r.exit_code == 6 and r.stdout == ""
    assert re.search(message, r.stderr), r.stderr


def test_bad_query_file_and_mode(labelled):
    queries, qrels = labelled
    queries.write_text('{"id": "q1", "text": "wireguard"}\n{"id": "q2"\n')
    r = invoke("eval", "--queries", str(queries), "--qrels", str(qrels))
    assert r.exit_code == 6 and f"{queries}:2: not valid JSON" in r.stderr
    assert invoke("eval", "--queries", str(queries), "--qrels", str(qrels),
                  "--mode", "fuzzy").exit_code == 2  # fmt: skip


def test_plain_queries_use_line_numbers_and_stdin(labelled):
    _, qrels = labelled
    qrels.write_text("1\tvpn\t1\n2\ttodo\t1\n")
    r = invoke("eval", "--queries", "-", "--qrels", str(qrels), "--mode", "keyword,hybrid",
               "--json", input="wireguard\npassport\n")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    m = metrics(r.records())
    assert m["keyword", "ndcg@10"] == 1.0 and m["hybrid", "mrr@10"] == 1.0


def test_vector_mode_needs_embeddings(standin, tmp_path, monkeypatch):
    notes = make_corpus(tmp_path / "corpus")
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    # Named: with Ollama down, a defaulted model would use the local embedder instead.
    assert invoke("ingest", str(notes), "-m", "nomic-embed-text").exit_code == 3  # no vectors
    (tmp_path / "q").write_text("wireguard\n")
    (tmp_path / "r").write_text("1\tvpn\t1\n")
    args = ("eval", "--queries", str(tmp_path / "q"), "--qrels", str(tmp_path / "r"))
    r = invoke(*args, "--mode", "vector")
    assert r.exit_code == 6 and "has no embeddings" in r.stderr
    r = invoke(*args, "--json")  # default modes: keyword only, with a warning
    assert r.exit_code == 0 and {rec["mode"] for rec in r.records()} == {"keyword"}
    assert "evaluating keyword mode only" in r.stderr


def test_terminal_gets_a_rich_table(labelled):
    from tests.cli import run_in_pty

    queries, qrels = labelled
    code, shown = run_in_pty(["eval", "--queries", str(queries), "--qrels", str(qrels),
                              "--mode", "keyword"])  # fmt: skip
    text = re.sub(rb"\x1b\[[0-9;]*m", b"", shown).decode()
    assert code == 0, text
    assert "Retrieval quality of 'default'" in text and b"\x1b[" in shown
    row = next(line for line in text.splitlines() if line.startswith("keyword"))
    assert row.split()[1:6] == ["0.6667", "0.6667", "0.6667", "0.6667", "1"]
