"""`localgpt search`: modes, filters, output formats, and the keyword fallback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import invoke, run_in_pty
from tests.kb import embed_bodies, make_corpus


@pytest.fixture
def corpus(standin, tmp_path: Path) -> Path:
    notes = make_corpus(tmp_path / "corpus")
    assert invoke("ingest", str(notes)).exit_code == 0
    return notes


def names(records: list[dict]) -> list[str]:
    return [Path(r["path"]).name for r in records]


def test_hybrid_json_hits(corpus, standin):
    r = invoke("search", "wireguard tunnel", "--json", "-k", "3")
    assert r.exit_code == 0, r.stderr
    hits = r.records()
    assert 1 <= len(hits) <= 3
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    top = hits[0]
    assert top["type"] == "hit" and top["mode"] == "hybrid"
    assert names(hits)[0] == "vpn.md" and "wireguard" in top["text"]
    assert set(top) >= {"rank", "score", "document_id", "path", "chunk", "page", "text"}
    # the query was embedded with the model's query prefix
    assert embed_bodies(standin)[-1]["input"] == ["search_query: wireguard tunnel"]


def test_modes(corpus):
    keyword = invoke("search", "--mode", "keyword", "passport", "--json").records()
    assert names(keyword)[:1] == ["todo.txt"] and keyword[0]["mode"] == "keyword"
    vector = invoke("search", "--mode", "vector", "quasar observations", "--json").records()
    assert vector[0]["mode"] == "vector" and names(vector)[0] == "manual.pdf"
    assert vector[0]["page"] == 2
    assert all(0.3 <= h["score"] <= 1.0 for h in vector)  # cosine, above the threshold
    strict = invoke("search", "--mode", "vector", "quasar", "--threshold", "0.99", "--json")
    assert strict.exit_code == 0 and strict.records() == []


def test_filters(corpus):
    by_type = invoke("search", "--type", "code", "retry backoff", "--json").records()
    assert by_type and set(names(by_type)) == {"retry.py"}
    by_path = invoke("search", "--path", "*/code/*", "the", "--json").records()
    assert set(names(by_path)) <= {"retry.py"}
    pdf_id = invoke("docs", "show", str(corpus / "manual.pdf"), "--json").records()[0][
        "document_id"
    ]
    by_doc = invoke("search", "--doc", pdf_id, "page", "--json").records()
    assert by_doc and {h["document_id"] for h in by_doc} == {pdf_id}


def test_plain_output_is_one_line_per_hit(corpus):
    r = invoke("search", "-k", "2", "quasar observations")
    assert r.exit_code == 0 and "\x1b[" not in r.stdout
    lines = r.stdout.splitlines()
    assert 1 <= len(lines) <= 2
    rank, score, where, text = lines[0].split("\t")
    assert rank == "1" and float(score) > 0
    assert where.endswith("manual.pdf:2") and "quasar" in text


def test_no_hits_prints_nothing_on_stdout(corpus):
    r = invoke("search", "--mode", "keyword", "xylophonist")
    assert r.exit_code == 0 and r.stdout == ""


def test_falls_back_to_keyword_when_ollama_is_down(corpus, standin, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens on discard
    r = invoke("search", "wireguard", "--json")
    assert r.exit_code == 0
    hits = r.records()
    assert names(hits)[0] == "vpn.md" and hits[0]["mode"] == "keyword"
    assert '"code":"ollama_unreachable"' in r.stderr and "keyword" in r.stderr


def test_another_model_is_refused(corpus):
    r = invoke("search", "-m", "all-minilm", "wireguard")
    assert r.exit_code == 6 and "nomic-embed-text" in r.stderr


def test_missing_collection_is_exit_6(corpus):
    r = invoke("search", "-C", "nope", "anything")
    assert r.exit_code == 6 and "localgpt ingest -C nope" in r.stderr


def test_terminal_output_highlights_query_words(corpus, standin):
    code, screen = run_in_pty(["search", "-k", "1", "wireguard"])
    assert code == 0
    text = re.sub(rb"\x1b\[[0-9;]*m", b"", screen).decode()
    assert " 1. " in text and "vpn.md:" in text
    assert re.search(rb"\x1b\[[0-9;]*1[;0-9]*mwireguard", screen)  # bold match


def test_terminal_ingest_shows_a_summary(standin, tmp_path):
    notes = make_corpus(tmp_path / "c2")
    code, screen = run_in_pty(["ingest", str(notes)])
    assert code == 0
    screen = re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", screen)
    assert b"4 added, 0 unchanged" in screen


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_query_is_a_usage_error(corpus, standin, query):
    before = len(standin.requests)
    r = invoke("search", query)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("localgpt: error: Nothing to search for: the query is empty.")
    assert len(r.stderr.splitlines()) == 1
    assert len(standin.requests) == before  # nothing embedded


@pytest.mark.parametrize("value", ["2", "-1", "1.01", "nan"])
@pytest.mark.parametrize(
    "command",
    [("search", "wireguard"), ("chat", "hi"),
     ("eval", "--queries", "q.jsonl", "--qrels", "qrels.tsv")],
)  # fmt: skip
def test_threshold_outside_0_to_1_is_a_usage_error(corpus, standin, command, value):
    r = invoke(*command, "--threshold", value)
    assert r.exit_code == 2, r.stderr
    assert "Invalid value for '--threshold'" in r.stderr and "0.0<=x<=1.0" in r.stderr
    assert standin.chat_requests() == [] and r.stdout == ""


def test_no_unreachable_warning_while_ollama_is_up(standin, tmp_path, monkeypatch):
    notes = make_corpus(tmp_path / "corpus")
    up = standin.url
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # ingested while Ollama was down
    # Named: with Ollama down, a defaulted model would use the local embedder instead.
    assert invoke("ingest", str(notes), "-m", "nomic-embed-text").exit_code == 3
    monkeypatch.setenv("OLLAMA_HOST", up)
    r = invoke("search", "wireguard")
    assert r.exit_code == 0 and "vpn.md" in r.stdout
    assert "unreachable" not in r.stderr.lower()
    assert r.stderr == (
        "localgpt: warning: Collection 'default' has no embeddings yet (the next ingest with "
        "Ollama up makes them): falling back to keyword search.\n"
    )


def test_unknown_type_is_a_usage_error_listing_the_known_ones(corpus):
    r = invoke("search", "--type", "foo", "wireguard")
    assert r.exit_code == 2 and r.stdout == ""
    assert ("'foo' is not one of 'pdf', 'markdown', 'code', 'text', 'html', 'docx'"
            in r.stderr)  # fmt: skip
    upper = invoke("search", "--type", "CODE", "retry backoff", "--json").records()
    assert upper and set(names(upper)) == {"retry.py"}


def test_doc_takes_the_id_docs_list_prints_or_any_unique_prefix(corpus):
    listed = invoke("docs", "list").stdout.splitlines()[1:]
    short = next(line.split("\t")[0] for line in listed if "manual.pdf" in line)
    assert len(short) == 12
    for ref in (short, short[:5], str(corpus / "manual.pdf")):
        hits = invoke("search", "--doc", ref, "page", "--json").records()
        assert hits and set(names(hits)) == {"manual.pdf"}, ref
    batch = invoke("search", "--doc", short, "--queries", "-", "--json", input="page\n")
    assert set(names(batch.records())) == {"manual.pdf"}
    missing = invoke("search", "--doc", "zzzz", "page")
    assert missing.exit_code == 6 and "No document 'zzzz'" in missing.stderr


def test_an_ambiguous_doc_prefix_lists_the_candidates(standin, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(17):  # 17 ids in 16 hex digits: two share a first character
        (folder / f"n{n}.txt").write_text(f"note number {n}\n")
    assert invoke("ingest", str(folder)).exit_code == 0
    ids = [r["document_id"] for r in invoke("docs", "list", "--json").records()]
    first = next(c for c in "0123456789abcdef" if sum(i.startswith(c) for i in ids) > 1)
    sharing = sorted(i for i in ids if i.startswith(first))
    for args in (("search", "--doc", first, "note"), ("docs", "show", first),
                 ("docs", "rm", first)):  # fmt: skip
        r = invoke(*args)
        assert r.exit_code == 6, r.stderr
        (line,) = r.stderr.splitlines()
        assert f"document id {first!r} is ambiguous: it starts " in line
        assert all(i in line for i in sharing[:5])
    assert len(invoke("docs", "list", "--json").records()) == 17  # nothing removed
