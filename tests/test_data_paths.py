"""The folders localgpt writes to (LOCALGPT_HOME, --db): a path that cannot be one is one
line naming it and its setting, never an internal error; read-only commands create nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke


@pytest.fixture
def a_file(isolated_env: Path) -> Path:
    path = isolated_env / "not-a-folder"
    path.write_text("keep me\n")
    return path


@pytest.mark.parametrize(
    "args", [("chat", "--no-rag", "hi"), ("ingest", "{doc}")], ids=["chat", "ingest"]
)
@pytest.mark.parametrize("home", ["{file}", "{file}/sub", "/proc/localgpt-home"])
def test_home_that_cannot_be_a_folder_is_exit_6(standin, a_file, tmp_path, monkeypatch,
                                                args, home):  # fmt: skip
    doc = tmp_path / "doc.txt"
    doc.write_text("hello there\n")
    home = home.format(file=a_file)
    monkeypatch.setenv("LOCALGPT_HOME", home)
    r = invoke(*(a.format(doc=doc) for a in args))
    assert r.exit_code == 6, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"localgpt: error: Cannot use {home} (LOCALGPT_HOME) as a folder: ")
    assert "internal error" not in line
    assert a_file.read_text() == "keep me\n"
    assert standin.chat_requests() == [] and not [q for q in standin.requests
                                                  if q.path == "/api/embed"]  # fmt: skip


def test_a_file_as_home_says_so(standin, a_file, monkeypatch):
    monkeypatch.setenv("LOCALGPT_HOME", str(a_file))
    r = invoke("chat", "--no-rag", "hi")
    assert r.stderr.rstrip().endswith(
        "as a folder: it is a file, not a folder. Point LOCALGPT_HOME at a folder you can write."
    )


def test_db_flag_that_cannot_be_a_folder_is_a_usage_error(standin, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("hello there\n")
    r = invoke("ingest", str(doc), "--db", "/proc/foo")
    assert r.exit_code == 2, r.stderr
    assert r.stderr == (
        "localgpt: error: Cannot use /proc/foo (--db) as a folder: No such file or "
        "directory. Point --db at a folder you can write.\n"
    )


def test_db_env_that_cannot_be_a_folder_is_exit_6(standin, tmp_path, monkeypatch):
    doc = tmp_path / "doc.txt"
    doc.write_text("hello there\n")
    monkeypatch.setenv("LOCALGPT_DB", "/proc/foo")
    r = invoke("ingest", str(doc), "--json")
    assert r.exit_code == 6
    assert r.stderr == (
        "localgpt: error: Cannot use /proc/foo (LOCALGPT_DB) as a folder: No such file or "
        "directory. Point LOCALGPT_DB at a folder you can write.\n"
    )
    assert r.records()[-1]["type"] == "error"


@pytest.mark.parametrize(
    "args",
    [("search", "hello"), ("search", "--mode", "keyword", "hello"), ("docs", "list"),
     ("docs", "show", "x"), ("docs", "stats"), ("docs", "collections"),
     ("ingest", "--dry-run", "{doc}"), ("eval", "--queries", "{doc}", "--qrels", "{qrels}")],
)  # fmt: skip
@pytest.mark.parametrize("where", ["home", "db"])
def test_read_only_commands_create_nothing(standin, tmp_path, monkeypatch, args, where):
    doc = tmp_path / "doc.txt"
    doc.write_text("hello there\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("1\tdoc\t1\n")
    fresh = tmp_path / "fresh" / "deeper"
    if where == "home":
        monkeypatch.setenv("LOCALGPT_HOME", str(fresh))
    else:
        args = (*args, "--db", str(fresh))
    r = invoke(*(a.format(doc=doc, qrels=qrels) for a in args))
    assert r.exit_code in (0, 6), r.stderr
    assert "internal error" not in r.stderr
    assert not (tmp_path / "fresh").exists()


def test_read_only_command_on_a_bad_db_is_one_line(standin):
    r = invoke("search", "--db", "/proc/foo", "hello")
    assert r.exit_code == 6
    assert r.stderr.startswith("localgpt: error: Collection 'default' does not exist in /proc/foo.")
    assert len(r.stderr.splitlines()) == 1


def test_a_tilde_in_the_store_path_is_the_home_folder_wherever_the_command_runs(
    standin, tmp_path, monkeypatch
):
    """LanceDB expands `~` in a store path; the lock and manifests must land beside the
    tables, not in a folder named `~` under the current folder."""
    user_home = tmp_path / "user"
    user_home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    doc = tmp_path / "doc.txt"
    doc.write_text("the vpn resets with the blue button\n")
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("LOCALGPT_DB", "~/kb")
    monkeypatch.chdir(elsewhere)
    r = invoke("ingest", str(doc))
    assert r.exit_code == 0, r.stderr
    assert (user_home / "kb" / "default.lance").is_dir()
    assert (user_home / "kb" / "_localgpt" / "ingest.lock").exists()
    assert list(elsewhere.iterdir()) == []
    r = invoke("search", "--json", "vpn")
    assert r.exit_code == 0, r.stderr
    assert '"path":"' + str(doc) + '"' in r.stdout


def test_a_file_uri_store_that_cannot_be_a_folder_is_a_usage_error(standin, a_file, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("hello there\n")
    r = invoke("ingest", str(doc), "--db", f"file://{a_file}/kb")
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"localgpt: error: Cannot use {a_file}/kb (--db) as a folder: ")
    assert a_file.read_text() == "keep me\n"
