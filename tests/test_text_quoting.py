"""Paths in text output are C-quoted as git quotes them when a tab, newline or other unsafe
character would break the one-record-per-line, tab-separated output; NDJSON is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgpt_cli.render.tables import quote_path
from tests.cli import invoke


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("notes/vpn.md", "notes/vpn.md"),
        ("notes/café ünïcode.md", "notes/café ünïcode.md"),  # printable text stays bare
        ("dir/a\tb.txt", '"dir/a\\tb.txt"'),
        ("two\nlines.md", '"two\\nlines.md"'),
        ("cr\rbell\a", '"cr\\rbell\\a"'),
        ('say "hi".txt', '"say \\"hi\\".txt"'),
        ("back\\slash", '"back\\\\slash"'),
        ("esc\x1b[31m", '"esc\\033[31m"'),
        ("del\x7f", '"del\\177"'),
        ("nel\x85", '"nel\\302\\205"'),  # a C1 control: the octal of its UTF-8 bytes
        ("caf\udce9.txt", '"caf\\351.txt"'),  # a name that is not UTF-8: its raw byte
    ],
)
def test_quote_path_as_git_does(path, shown):
    assert quote_path(path) == shown


@pytest.fixture
def odd_names(standin, tmp_path: Path) -> Path:
    root = tmp_path / "odd"
    root.mkdir()
    (root / "a\tb.txt").write_text("zebra crossing notes\n")
    (root / "c\nd.md").write_text("# Zebra\n\nzebra herd migration\n")
    (root / "plain.txt").write_text("nothing odd about zebra\n")
    assert invoke("ingest", str(root)).exit_code == 0
    return root


def test_docs_list_prints_one_record_per_line(odd_names):
    lines = invoke("docs", "list").stdout.splitlines()
    assert len(lines) == 4  # header + 3 documents
    assert all(len(line.split("\t")) == 6 for line in lines)
    paths = sorted(line.split("\t")[1] for line in lines[1:])
    assert paths == sorted([f'"{odd_names}/a\\tb.txt"', f'"{odd_names}/c\\nd.md"',
                            f"{odd_names}/plain.txt"])  # fmt: skip
    records = invoke("docs", "list", "--json").records()
    assert sorted(r["path"] for r in records) == sorted(
        str(odd_names / n) for n in ("a\tb.txt", "c\nd.md", "plain.txt")
    )


def test_search_prints_one_hit_per_line(odd_names):
    r = invoke("search", "--mode", "keyword", "zebra", "-k", "5")
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(len(line.split("\t")) == 4 for line in lines)
    where = sorted(line.split("\t")[2].rsplit(":", 1)[0] for line in lines)  # path:lines
    assert where == sorted([f'"{odd_names}/a\\tb.txt"', f'"{odd_names}/c\\nd.md"',
                            f"{odd_names}/plain.txt"])  # fmt: skip
    batch = invoke("search", "--mode", "keyword", "--queries", "-", input="zebra\n")
    assert [len(line.split("\t")) for line in batch.stdout.splitlines()] == [5, 5, 5]
    records = invoke("search", "--mode", "keyword", "zebra", "--json").records()
    assert str(odd_names / "c\nd.md") in {h["path"] for h in records}


def test_chat_sources_list_quotes_paths_too():
    from localgpt_cli.render.chat import source_line

    hit = {"rank": 1, "path": "/n/a\tb.md", "chunk": 0, "score": 0.5, "page": 2}
    assert source_line(hit) == '[1] "/n/a\\tb.md":2 (chunk 0, score 0.500)'
