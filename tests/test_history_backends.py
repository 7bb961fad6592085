"""Where history is kept, seen from the command line: --no-save and the memory backend,
a shared PostgreSQL history (a real server, tests/pg.py), export | import between them,
and the credentials that are never shown.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localgpt_cli.history.postgres import PostgresStore
from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import invoke
from tests.pg import PASSWORD
from tests.standin import Reply
from tests.test_repl import Terminal


def db_path() -> Path:
    return Path(os.environ["LOCALGPT_HOME"]) / "history.db"


# -- in memory ------------------------------------------------------------------------------


def test_repl_with_no_save_remembers_every_turn_and_writes_nothing(standin, isolated_env):
    standin.script(Reply(content="Noted: atlas-7."), Reply(content="Fine."),
                   Reply(content="It is atlas-7."))  # fmt: skip
    term = Terminal("chat", "--no-save")
    for question, answer in [(b"my build server is atlas-7", b"Noted: atlas-7."),
                             (b"the weather is fine", b"Fine."),
                             (b"what is my build server called?", b"It is atlas-7.")]:
        term.read_until(b">>>")
        term.type(question + b"\r")
        term.read_until(answer)
    term.read_until(b">>>")
    term.type(b"/exit\r")
    assert term.wait() == 0
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent] == [
        "my build server is atlas-7", "Noted: atlas-7.", "the weather is fine", "Fine.",
        "what is my build server called?"]  # fmt: skip
    assert not db_path().exists()
    assert [p for p in Path(os.environ["LOCALGPT_HOME"]).rglob("*") if p.is_file()] == []
    assert list(isolated_env.rglob("*.db*")) == []


def test_no_save_continues_a_stored_conversation_without_adding_to_it(standin, isolated_env):
    standin.script(Reply(content="Four."), Reply(content="Eight."))
    first = invoke("chat", "--json", "what is 2+2?").records()[-1]["payload"]
    r = invoke("chat", "--no-save", "-c", "and doubled?")
    assert (r.exit_code, r.stdout) == (0, "Eight.\n")
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent] == ["what is 2+2?", "Four.", "and doubled?"]
    with SQLiteStore.open(db_path()) as store:
        assert [m.content for m in store.messages(first["conversation_id"])] == [
            "what is 2+2?", "Four."]


def test_the_memory_backend_keeps_nothing_between_processes(standin, isolated_env,
                                                            monkeypatch):
    monkeypatch.setenv("LOCALGPT_HISTORY_BACKEND", "memory")
    assert invoke("chat", "hi").exit_code == 0
    r = invoke("chat", "-c", "again")
    assert r.exit_code == 6 and "no conversation to continue" in r.stderr
    assert invoke("history").stderr.startswith("No conversations yet")
    assert not db_path().exists()


def test_a_wrong_backend_or_url_is_invalid_input(isolated_env, monkeypatch):
    monkeypatch.setenv("LOCALGPT_HISTORY_BACKEND", "cloud")
    r = invoke("history")
    assert r.exit_code == 6 and "LOCALGPT_HISTORY_BACKEND" in r.stderr
    monkeypatch.delenv("LOCALGPT_HISTORY_BACKEND")
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", "mysql://u:hunter2@db/x")
    r = invoke("history")
    assert r.exit_code == 6 and "postgresql://" in r.stderr and "hunter2" not in r.stderr


# -- credentials ------------------------------------------------------------------------------


def test_config_masks_the_password_of_the_history_url(isolated_env, monkeypatch):
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", "postgresql://team:hunter2@db.lan:5432/lg")
    r = invoke("config")
    assert "postgresql://team:***@db.lan:5432/lg" in r.stdout
    assert "hunter2" not in r.stdout + r.stderr
    records = invoke("config", "--json").records()
    (url,) = [rec for rec in records if rec.get("key") == "history.url"]
    assert (url["value"], url["source"]) == ("postgresql://team:***@db.lan:5432/lg",
                                             "env LOCALGPT_HISTORY_URL")
    (backend,) = [rec for rec in records if rec.get("key") == "history.backend"]
    assert (backend["value"], backend["source"]) == ("postgres",
                                                     "history.url (env LOCALGPT_HISTORY_URL)")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[history]\nurl = "postgresql://me@h/d?password=s3cret"\n')
    monkeypatch.delenv("LOCALGPT_HISTORY_URL")
    r = invoke("config")
    assert "password=***" in r.stdout and "s3cret" not in r.stdout


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def shared(pg_url: str, isolated_env, monkeypatch) -> str:
    """The environment's history is the PostgreSQL database at the returned URL."""
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", pg_url)
    return pg_url


def test_chat_and_history_work_on_postgres(standin, shared):
    standin.script(Reply(content="Paris.", thinking="easy"), Reply(content="Lyon."),
                   model="qwen3")
    done = invoke("chat", "--json", "-m", "qwen3", "capital of France?").records()[-1]["payload"]
    r = invoke("chat", "-c", "and its second city?")
    assert r.stdout == "Lyon.\n"
    with PostgresStore.open(shared) as store:
        messages = store.messages(done["conversation_id"])
    assert [m.content for m in messages] == [
        "capital of France?", "Paris.", "and its second city?", "Lyon."]
    assert messages[1].thinking == "easy" and messages[1].metadata["done_reason"] == "stop"
    (listed,) = invoke("history", "--json").records()
    assert (listed["id"], listed["messages"]) == (done["conversation_id"], 4)
    (hit,) = invoke("history", "search", "--json", "second city").records()
    assert hit["snippet"] == "and its **second** **city**?"
    assert not db_path().exists()


def test_export_import_moves_conversations_both_ways_idempotently(isolated_env, pg_url,
                                                                  monkeypatch):
    with SQLiteStore.open(db_path()) as store:
        first = store.create_conversation("qwen3", metadata={"system": "terse"})
        store.add_message(first.id, "user", "remember atlas-7")
        store.add_message(first.id, "assistant", "ok", thinking="hm",
                          metadata={"important": True, "provider": "ollama"})
        second = store.create_conversation("llama3.2")
        store.add_message(second.id, "user", "café in Zürich")
        exported = {c: store.export(c) for c in (first.id, second.id)}
    dump = invoke("history", "export", "--json")
    assert dump.exit_code == 0 and len(dump.records()) == 2
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", pg_url)
    r = invoke("history", "import", "--json", input=dump.stdout)
    assert r.exit_code == 0, r.stderr
    assert [(x["status"], x["added"]) for x in r.records()] == [("added", 2), ("added", 1)]
    again = invoke("history", "import", "--json", input=dump.stdout)
    assert [(x["status"], x["added"]) for x in again.records()] == [("unchanged", 0)] * 2
    with PostgresStore.open(pg_url) as store:
        assert {c: json.loads(store.export(c)) for c in exported} == {
            c: json.loads(doc) for c, doc in exported.items()}
        assert [h.conversation_id for h in store.search("zurich")] == [second.id]
        store.add_message(first.id, "user", "new on the server")
    back = invoke("history", "export")  # one JSON document a line, from PostgreSQL
    monkeypatch.delenv("LOCALGPT_HISTORY_URL")
    r = invoke("history", "import", "--json", input=back.stdout)
    assert [(x["conversation_id"], x["status"], x["added"]) for x in r.records()] == [
        (second.id, "unchanged", 0), (first.id, "updated", 1)]
    with SQLiteStore.open(db_path()) as store:
        assert store.get(first.id).messages == 3
        assert store.messages(first.id)[1].metadata == {"important": True, "provider": "ollama"}


def test_a_bad_import_is_refused_whole(isolated_env, tmp_path):
    with SQLiteStore.open(db_path()) as store:
        store.add_message(store.create_conversation("m").id, "user", "hello")
    good = invoke("history", "export", "--json").stdout
    r = invoke("history", "import", input=good + "{not json\n")
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr.startswith("localgpt: error: stdin line 2 is not JSON") and \
        r.stderr.count("\n") == 1
    markdown = invoke("history", "export", "latest", "--json", "-f", "markdown").stdout
    r = invoke("history", "import", input=markdown)
    assert r.exit_code == 6 and "markdown export" in r.stderr
    r = invoke("history", "import", input='{"type": "export", "content": 5}\n')
    assert r.exit_code == 6 and "line 1 is an export record without its content" in r.stderr
    assert "None" not in r.stderr


def test_wrong_password_is_exit_77_and_never_shows_it(isolated_env, pg_url, monkeypatch):
    wrong = pg_url.replace(PASSWORD, "not-the-password")
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", wrong)
    r = invoke("history")
    assert (r.exit_code, r.stdout) == (77, "")
    assert r.stderr.count("\n") == 1 and "refused the credentials" in r.stderr
    assert "not-the-password" not in r.stderr and ":***@" in r.stderr
    (error,) = invoke("history", "--json").records()
    assert error["code"] == "auth_failed"


def test_an_unreachable_server_is_exit_3_and_nothing_is_sent(standin, isolated_env,
                                                             monkeypatch):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", f"postgresql://u:pw@127.0.0.1:{port}/lg")
    r = invoke("chat", "hello")
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr.count("\n") == 1 and "not reachable" in r.stderr and "pw@" not in r.stderr
    assert standin.chat_requests() == []


def test_a_newer_schema_on_the_server_is_refused_untouched(isolated_env, pg_url, monkeypatch):
    with PostgresStore.open(pg_url) as store:
        store.add_message(store.create_conversation("m").id, "user", "kept")
        store._conn.execute("UPDATE localgpt_schema SET version = 99")
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", pg_url)
    r = invoke("history")
    assert r.exit_code == 6 and "schema version 99, newer than this localgpt" in r.stderr
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM localgpt_schema").fetchone()[0] == 99
        assert conn.execute("SELECT content FROM localgpt_messages").fetchall() == [("kept",)]


def test_an_older_schema_is_migrated_forward(pg_url, monkeypatch):
    from localgpt_cli.history import pg_schema

    monkeypatch.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:1])
    monkeypatch.setattr(pg_schema, "SCHEMA_VERSION", 1)
    with PostgresStore.open(pg_url) as store:
        cid = store.create_conversation("m").id
    step = ("ALTER TABLE localgpt_conversations ADD COLUMN pinned boolean NOT NULL DEFAULT false",)
    monkeypatch.setattr(pg_schema, "MIGRATIONS", (*pg_schema.MIGRATIONS, step))
    monkeypatch.setattr(pg_schema, "SCHEMA_VERSION", 2)
    with PostgresStore.open(pg_url) as store:
        assert store.get(cid).id == cid
        assert store._conn.execute("SELECT version FROM localgpt_schema").fetchone()[0] == 2
        assert store._conn.execute("SELECT pinned FROM localgpt_conversations").fetchone() == (
            False,)


def test_the_postgres_backend_connects_as_the_pg_variables_say(standin, pg_url, monkeypatch):
    from urllib.parse import urlsplit

    parts = urlsplit(pg_url)
    monkeypatch.setenv("LOCALGPT_HISTORY_BACKEND", "postgres")
    for var, value in {"PGHOST": parts.hostname, "PGPORT": str(parts.port),
                       "PGUSER": parts.username, "PGPASSWORD": parts.password,
                       "PGDATABASE": parts.path.lstrip("/")}.items():  # fmt: skip
        monkeypatch.setenv(var, str(value))
    done = invoke("chat", "--json", "stored via PG* variables").records()[-1]["payload"]
    with PostgresStore.open(pg_url) as store:
        assert store.get(done["conversation_id"]).title == "stored via PG* variables"
    assert not db_path().exists()
    monkeypatch.setenv("PGPASSWORD", "wrong")
    r = invoke("history")
    assert r.exit_code == 77 and "wrong" not in r.stderr


def test_reading_an_empty_database_needs_no_right_to_create_tables(
        standin, isolated_env, pg_server, pg_url, monkeypatch):  # fmt: skip
    """A read-only role (PostgreSQL 15 lets no one but the owner create in `public`) can
    run the read-only commands on a database localgpt never wrote to: they find nothing,
    as on a missing SQLite file, and create nothing. A write still says what is missing."""
    from urllib.parse import urlsplit

    import psycopg

    from localgpt_cli.ids import new_id

    role = "reader_" + new_id().lower()[:8]
    pg_server.admin(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    reader = pg_url.replace(f"{urlsplit(pg_url).username}:", f"{role}:", 1)
    monkeypatch.setenv("LOCALGPT_HISTORY_URL", reader)
    r = invoke("history", "list", "--json")
    assert (r.exit_code, r.stdout) == (0, ""), r.stderr
    r = invoke("history", "search", "--json", "anything")
    assert (r.exit_code, r.stdout) == (0, ""), r.stderr
    r = invoke("history", "show", "--json", "latest")
    assert r.exit_code == 6 and "Traceback" not in r.stderr
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('localgpt_schema')").fetchone()[0] is None
    r = invoke("chat", "hi")  # writing needs the tables: one line naming the refusal
    assert r.exit_code == 77 and "permission denied" in r.stderr and PASSWORD not in r.stderr
