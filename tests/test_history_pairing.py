"""Two writers on one conversation (issue 24, item 6): the questions and answers interleave
in the store (q1 q2 a2 a1), and each answer's `reply_to` pairs it with its own question in
`history show`, the Markdown export and the memory's replay; an existing database gains
the column with the answers linked to the question before them. On SQLite and on a real
PostgreSQL server.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localgpt_cli.history import pg_schema, schema
from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import ROOT, invoke
from tests.standin import Reply


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, isolated_env, monkeypatch) -> str:
    if request.param == "postgres":
        monkeypatch.setenv("LOCALGPT_HISTORY_URL", request.getfixturevalue("pg_url"))
    return str(request.param)


def test_interleaved_writers_are_paired_by_the_question_each_answers(backend, standin):
    standin.script(Reply(content="started"), Reply(content=["slow ", "answer ", "one"], delay=1.0),
                   Reply(content="fast answer two"), Reply(content="three"))  # fmt: skip
    assert invoke("chat", "start here").exit_code == 0
    slow = subprocess.Popen([sys.executable, "-m", "localgpt_cli", "chat", "-c", "question one"],
                            cwd=ROOT, env=os.environ.copy(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    give_up = time.monotonic() + 60
    while len(standin.chat_requests()) < 2 and time.monotonic() < give_up:
        time.sleep(0.05)
    fast = invoke("chat", "-c", "question two")  # answered while the first one streams
    assert fast.exit_code == 0, fast.stderr
    assert slow.wait(timeout=60) == 0, slow.stderr.read()  # type: ignore[union-attr]
    stored = [m["content"] for m in invoke("history", "show", "latest", "--json").records()]
    assert stored == ["start here", "started", "question one", "slow answer one",
                      "question two", "fast answer two"]
    markdown = invoke("history", "export", "latest", "-f", "markdown").stdout
    assert markdown.index("question one") < markdown.index("slow answer one") \
        < markdown.index("question two") < markdown.index("fast answer two")
    assert invoke("chat", "-c", "question three").exit_code == 0
    sent = [(m["role"], m["content"]) for m in standin.chat_requests()[-1]["messages"]
            if m["role"] != "system"]
    assert sent == [("user", "start here"), ("assistant", "started"),
                    ("user", "question one"), ("assistant", "slow answer one"),
                    ("user", "question two"), ("assistant", "fast answer two"),
                    ("user", "question three")]


def test_an_existing_sqlite_history_links_its_answers_to_the_question_before(tmp_path: Path):
    path = tmp_path / "history.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO conversations (id, model, created_at, updated_at)"
                 " VALUES ('C', 'm', 't', 't')")
    for seq, (mid, role) in enumerate([("S", "system"), ("Q1", "user"), ("A1", "assistant"),
                                       ("T1", "tool"), ("Q2", "user"), ("A2", "assistant")]):
        conn.execute("INSERT INTO messages (id, conversation_id, seq, role, created_at)"
                     " VALUES (?, 'C', ?, ?, 't')", (mid, seq, role))
    conn.close()
    with SQLiteStore.open(path) as store:
        linked = [(m.id, m.reply_to) for m in store.messages("C")]
    assert linked == [("S", None), ("Q1", None), ("A1", "Q1"), ("T1", "Q1"), ("Q2", None),
                      ("A2", "Q2")]


def test_an_existing_postgres_history_links_its_answers_to_the_question_before(pg_url):
    import psycopg

    from localgpt_cli.history.postgres import PostgresStore

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE localgpt_schema (version integer NOT NULL)")
        conn.execute("INSERT INTO localgpt_schema VALUES (1)")
        for statement in pg_schema.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO localgpt_conversations (id, model, created_at, updated_at)"
                     " VALUES ('C', 'm', 't', 't')")
        for seq, (mid, role) in enumerate([("Q1", "user"), ("A1", "assistant"),
                                           ("Q2", "user"), ("A2", "assistant")]):
            conn.execute("INSERT INTO localgpt_messages (id, conversation_id, seq, role,"
                         " created_at, search) VALUES (%s, 'C', %s, %s, 't', ''::tsvector)",
                         (mid, seq, role))  # fmt: skip
    with PostgresStore.open(pg_url) as store:
        linked = [(m.id, m.reply_to) for m in store.messages("C")]
    assert linked == [("Q1", None), ("A1", "Q1"), ("Q2", None), ("A2", "Q2")]


# -- history import of a message the export says differently (issue 24, item 7) -----------


def test_importing_a_changed_message_is_a_conflict_unless_replace(backend, standin):
    standin.script(Reply(content="the original answer"), Reply(content="another"))
    assert invoke("chat", "first conversation").exit_code == 0
    document = json.loads(invoke("history", "export", "latest").stdout)
    document["messages"][1]["content"] = "an edited answer"
    assert invoke("chat", "second conversation").exit_code == 0
    second = invoke("history", "export", "latest").stdout
    assert invoke("history", "rm", "latest", "--yes").exit_code == 0
    both = json.dumps(document) + "\n" + json.dumps(json.loads(second)) + "\n"
    r = invoke("history", "import", "--json", input=both)
    *imported, error = r.records()
    assert (r.exit_code, [x["status"] for x in imported]) == (5, ["conflict", "added"])
    assert error["code"] == "import_conflict"
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and "differs from the stored copy" in lines[0] \
        and "--replace" in lines[1]
    cid = document["conversation"]["id"]
    shown = [m["content"] for m in invoke("history", "show", cid, "--json").records()]
    assert shown == ["first conversation", "the original answer"]
    assert len(invoke("history", "--json").records()) == 2  # the other one was imported
    r = invoke("history", "import", "--json", "--replace", input=both)
    assert (r.exit_code, [x["status"] for x in r.records()]) == (0, ["updated", "unchanged"])
    shown = [m["content"] for m in invoke("history", "show", cid, "--json").records()]
    assert shown == ["first conversation", "an edited answer"]
    (hit,) = invoke("history", "search", "--json", "edited").records()
    assert hit["conversation_id"] == cid


def test_importing_a_message_stored_in_another_conversation_is_a_conflict(backend, standin):
    standin.script(Reply(content="one"), Reply(content="two"))
    assert invoke("chat", "first").exit_code == 0
    first = json.loads(invoke("history", "export", "latest").stdout)
    assert invoke("chat", "second").exit_code == 0
    second = json.loads(invoke("history", "export", "latest").stdout)
    before = invoke("history", "export").stdout
    first["conversation"]["id"] = "01NEWCONVERSATION000000000"
    for m in first["messages"]:
        m["conversation_id"] = first["conversation"]["id"]
    first["messages"][1]["id"] = second["messages"][1]["id"]  # its id taken over there
    r = invoke("history", "import", input=json.dumps(first))
    assert (r.exit_code, r.stdout) == (5, "")
    warning, summary, error = r.stderr.splitlines()
    assert "is stored in another conversation" in warning and "Imported 0 new" in summary
    assert error.startswith("localgpt: error: 1 conversation of the input")
    assert invoke("history", "export").stdout == before
