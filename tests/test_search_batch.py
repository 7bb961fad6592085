"""`localgpt search --queries FILE|-`: many queries, one process, one open of the table."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import ROOT, invoke, run_with_stdin_closed
from tests.kb import embed_bodies, make_corpus


@pytest.fixture
def corpus(standin, tmp_path: Path) -> Path:
    notes = make_corpus(tmp_path / "corpus")
    assert invoke("ingest", str(notes)).exit_code == 0
    return notes


def test_jsonl_and_plain_lines_match_one_shot_search(corpus, standin, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text('{"id": "vpn", "text": "wireguard tunnel"}\n\nquasar observations\n')
    calls = standin.embed_calls
    r = invoke("search", "--queries", str(queries), "-k", "2", "--json")
    assert r.exit_code == 0, r.stderr
    hits = r.records()
    assert {h["query_id"] for h in hits} == {"vpn", "3"}  # a plain line's id: its line number
    assert standin.embed_calls == calls + 1  # both queries embedded in one request
    assert embed_bodies(standin)[-1]["input"] == [
        "search_query: wireguard tunnel", "search_query: quasar observations"
    ]  # fmt: skip
    for qid, text in (("vpn", "wireguard tunnel"), ("3", "quasar observations")):
        alone = invoke("search", text, "-k", "2", "--json").records()
        batch = [{k: v for k, v in h.items() if k != "query_id"} for h in hits
                 if h["query_id"] == qid]  # fmt: skip
        assert batch and batch == alone
        assert [h["rank"] for h in batch] == list(range(1, len(batch) + 1))


def test_stdin_flags_and_plain_output(corpus):
    r = invoke("search", "--queries", "-", "--mode", "keyword", "--type", "text", "-k", "3",
               input="passport\nwireguard\n")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert rows and all(row[0] == "1" for row in rows)  # only todo.txt is text: query 1
    assert rows[0][1] == "1" and "todo.txt" in rows[0][3] and "passport" in rows[0][4]


def test_a_bad_line_stops_before_searching(corpus, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "text": "vpn"}\n{"id": "b", "text": \n')
    r = invoke("search", "--queries", str(queries), "--json")
    assert r.exit_code == 6 and r.stdout.splitlines()[-1].startswith('{"type":"error"')
    assert f"{queries}:2: not valid JSON" in r.stderr
    assert not [rec for rec in r.records() if rec["type"] == "hit"]


def test_a_line_without_words_is_named_in_keyword_mode(corpus):
    r = invoke("search", "--queries", "-", "--mode", "keyword", input="vpn\n?!\n")
    assert r.exit_code == 6 and r.stdout == ""
    assert "<stdin>:2: the query '?!' has no words" in r.stderr


def test_query_and_file_are_exclusive(corpus, tmp_path):
    assert invoke("search").exit_code == 2
    (tmp_path / "q").write_text("vpn\n")
    assert invoke("search", "vpn", "--queries", str(tmp_path / "q")).exit_code == 2
    assert invoke("search", "--queries", str(tmp_path / "missing")).exit_code == 6


def test_ollama_down_warns_once_and_searches_by_keyword(corpus, monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    r = invoke("search", "--queries", "-", "--json", input="passport\nwireguard\nzebra\n")
    assert r.exit_code == 0
    assert {h["mode"] for h in r.records()} == {"keyword"}
    assert {h["query_id"] for h in r.records()} == {"1", "2", "3"}
    warnings = [line for line in r.stderr.splitlines() if '"warning"' in line]
    assert len(warnings) == 2  # the embedding failure, and the fallback: once each


def test_terminal_shows_each_query_above_its_passages(corpus, tmp_path):
    from tests.cli import run_in_pty

    (tmp_path / "q").write_text('{"id": "a[b]", "text": "wireguard"}\npassport\n')
    code, shown = run_in_pty(["search", "--queries", str(tmp_path / "q"), "--mode", "keyword"])
    text = re.sub(rb"\x1b\[[0-9;]*m", b"", shown).decode()
    assert code == 0, text
    assert text.index("a[b]  wireguard") < text.index("vpn.md") < text.index("2  passport")
    assert text.index("2  passport") < text.index("todo.txt")



def test_queries_from_stdin_that_is_not_utf8_or_closed_is_one_line_exit_6(standin):
    r = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", "search", "--queries", "-"],
        input=b"caf\xe9 vpn\n", capture_output=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 6, r.stderr
    assert r.stderr.decode().startswith("localgpt: error: <stdin>: not UTF-8 text")
    assert len(r.stderr.decode().splitlines()) == 1
    closed = run_with_stdin_closed("search", "--queries", "-")
    assert closed.exit_code == 6, closed.stderr
    assert closed.stderr.startswith("localgpt: error: stdin is closed")


def test_a_labelled_batch_prints_what_one_query_at_a_time_prints(standin, tmp_path):
    """80 Cranfield questions over 300 of its documents: more than one batch of 64, so
    the store searches the second batch's vectors in one multi-vector search on its own
    thread while the first is reranked and gated. Every query's records (same passages,
    order and scores) equal a one-query `search` run's, at k=10 and k=100 (the gate
    reads every kept passage), and the records come in query order."""
    from tests.cranfield import document_text, load_corpus, load_queries

    folder = tmp_path / "cranfield"
    folder.mkdir()
    for doc_id, title, text in load_corpus()[:300]:
        (folder / f"{doc_id}.txt").write_text(document_text(title, text))
    assert invoke("ingest", str(folder)).exit_code == 0
    questions = load_queries()[:80]
    lines = [json.dumps({"id": qid, "text": text}) for qid, text in questions]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    for k, alone_checked in (("10", questions[::4]), ("100", questions[::10])):
        r = invoke("search", "--queries", str(tmp_path / "q.jsonl"), "-k", k, "--json")
        assert r.exit_code == 0, r.stderr
        by_query: dict[str, list[dict]] = {}
        for record in r.records():
            by_query.setdefault(record.pop("query_id"), []).append(record)
        order = list(dict.fromkeys(rec["query_id"] for rec in r.records()))
        assert order == [qid for qid, _ in questions if qid in by_query]
        assert len(by_query) > 70  # a few questions find nothing on 300 documents
        for qid, text in alone_checked:
            alone = invoke("search", text, "-k", k, "--json")
            assert alone.exit_code == 0, alone.stderr
            assert by_query.get(qid, []) == alone.records(), (k, qid)
