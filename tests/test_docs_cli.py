"""`localgpt docs`: list, show, rm, stats and collections, in plain text and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke, run_in_pty
from tests.kb import home, make_corpus, snapshot


@pytest.fixture
def corpus(standin, tmp_path: Path) -> Path:
    notes = make_corpus(tmp_path / "corpus")
    assert invoke("ingest", str(notes)).exit_code == 0
    return notes


def ids_by_name(records: list[dict]) -> dict[str, str]:
    return {Path(r["path"]).name: r["document_id"] for r in records}


def test_list_json_and_plain(corpus):
    records = invoke("docs", "list", "--json").records()
    assert [Path(r["path"]).name for r in records] == [
        "retry.py", "manual.pdf", "todo.txt", "vpn.md",
    ]  # fmt: skip  (sorted by full path: code/ first)
    pdf = next(r for r in records if r["path"].endswith(".pdf"))
    assert pdf["type"] == "document" and pdf["doc_type"] == "pdf"
    assert pdf["chunks"] == 2 and pdf["status"] == "ok" and pdf["pending"] == 0
    assert pdf["ingested_at"].endswith("Z")
    plain = invoke("docs")  # list is the default
    lines = plain.stdout.splitlines()
    assert lines[0].split("\t") == ["ID", "PATH", "TYPE", "CHUNKS", "STATUS", "INGESTED"]
    row = next(line.split("\t") for line in lines if "manual.pdf" in line)
    assert row[0] == pdf["document_id"][:12] and row[2:5] == ["pdf", "2", "ok"]
    assert "\x1b[" not in plain.stdout


def test_show_by_path_id_and_prefix(corpus):
    ids = ids_by_name(invoke("docs", "list", "--json").records())
    by_path = invoke("docs", "show", str(corpus / "vpn.md"), "--json").records()
    by_id = invoke("docs", "show", ids["vpn.md"], "--json").records()
    by_prefix = invoke("docs", "show", ids["vpn.md"][:6], "--json").records()
    assert by_path == by_id == by_prefix
    assert [c["chunk"] for c in by_id] == list(range(len(by_id)))
    assert all(c["type"] == "chunk" and c["document_id"] == ids["vpn.md"] for c in by_id)
    plain = invoke("docs", "show", str(corpus / "manual.pdf"))
    assert "--- chunk 0  page 1" in plain.stdout and "quasar" in plain.stdout


def test_show_unknown_document_is_exit_6(corpus):
    r = invoke("docs", "show", "no-such-doc", "--json")
    assert r.exit_code == 6
    assert r.records()[0]["code"] == "not_found"
    assert "localgpt docs list" in r.stderr


def test_rm_removes_rows_and_manifest_entry(corpus, standin):
    ids = ids_by_name(invoke("docs", "list", "--json").records())
    r = invoke("docs", "rm", "-y", str(corpus / "todo.txt"), ids["vpn.md"][:8], "--json")
    assert r.exit_code == 0
    removed = {Path(x["path"]).name: x for x in r.records()}
    assert set(removed) == {"todo.txt", "vpn.md"}
    assert all(x["status"] == "removed" and x["chunks"] >= 1 for x in removed.values())
    left = {row[1] for row in snapshot(home())}
    assert left == {ids["retry.py"], ids["manual.pdf"]}
    assert sorted(ids_by_name(invoke("docs", "list", "--json").records())) == [
        "manual.pdf", "retry.py",
    ]  # fmt: skip
    # the manifest forgot them too: the next ingest adds them back (they still exist)
    again = invoke("ingest", str(corpus), "--json").records()
    assert sorted(Path(x["path"]).name for x in again if x["type"] == "document") == [
        "todo.txt", "vpn.md",
    ]  # fmt: skip
    plain = invoke("docs", "rm", "--yes", str(corpus / "todo.txt"))
    assert plain.exit_code == 0 and plain.stdout == "" and "removed" in plain.stderr


def test_stats_json_and_plain(corpus):
    (stats,) = invoke("docs", "stats", "--json").records()
    assert stats["type"] == "stats" and stats["collection"] == "default"
    assert stats["documents"] == 4 and stats["chunks"] >= 5 and stats["pending"] == 0
    assert (stats["model"], stats["dim"]) == ("nomic-embed-text", 768)
    assert stats["bytes"] > 0
    assert any(i["name"] == "text_idx" for i in stats["indexes"])
    plain = invoke("docs", "stats").stdout
    assert "embedding model\tnomic-embed-text" in plain and "documents\t4" in plain


def test_collections(corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nanother collection\n")
    assert invoke("ingest", "-C", "papers", str(other)).exit_code == 0
    records = invoke("docs", "collections", "--json").records()
    assert [(r["name"], r["model"], r["dim"]) for r in records] == [
        ("default", "nomic-embed-text", 768), ("papers", "nomic-embed-text", 768),
    ]  # fmt: skip
    assert records[1]["chunks"] == 1
    plain = invoke("docs", "collections").stdout.splitlines()
    assert plain[0] == "NAME\tCHUNKS\tMODEL\tDIM" and plain[2].startswith("papers\t1\t")
    listed = invoke("docs", "list", "-C", "papers", "--json").records()
    assert [Path(r["path"]).name for r in listed] == ["x.md"]


def test_unknown_collection_is_exit_6(isolated_env):
    r = invoke("docs", "list", "-C", "nothing")
    assert r.exit_code == 6 and "localgpt ingest -C nothing" in r.stderr
    empty = invoke("docs", "collections")
    assert empty.exit_code == 0 and empty.stdout == ""


def test_rm_without_a_terminal_needs_yes(corpus):
    before = snapshot(home())
    r = invoke("docs", "rm", str(corpus / "todo.txt"))
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == (
        "localgpt: error: refusing to remove 1 document without confirmation: stdin is not a "
        "terminal. Pass -y to do it without asking.\n"
    )
    assert snapshot(home()) == before


def test_rm_on_a_terminal_asks_first(corpus):
    before = snapshot(home())
    code, screen = run_in_pty(["docs", "rm", str(corpus / "todo.txt")], answer=b"n\n")
    assert code == 0 and b"Remove 1 document? [y/N]" in screen and b"Nothing deleted." in screen
    assert b"todo.txt (1 chunk)" in screen
    assert snapshot(home()) == before
    code, screen = run_in_pty(["docs", "rm", str(corpus / "todo.txt")], answer=b"y\n")
    assert code == 0 and b"removed" in screen
    assert "todo.txt" not in {Path(row[2]).name for row in snapshot(home())}


def test_show_on_a_terminal_prints_brackets_in_headings_and_paths(standin, tmp_path):
    """rich reads `[/...]` as markup: a heading such as `mount [/dev/sdX]` was an
    internal error on a terminal, and `[draft]` in a path vanished."""
    folder = tmp_path / "[draft]"
    folder.mkdir()
    doc = folder / "mount.md"
    doc.write_text("# Usage: mount [/dev/sdX]\n\nMount the disk before the backup runs.\n")
    assert invoke("ingest", str(doc)).exit_code == 0
    code, screen = run_in_pty(["docs", "show", str(doc)])
    assert code == 0, screen
    assert b"[draft]" in screen and b"mount [/dev/sdX]" in screen
