"""`localgpt history`: every subcommand in text and --json, confirmation, faults.

Every test runs twice: on the SQLite file under LOCALGPT_HOME and on a fresh database
of a real PostgreSQL server (LOCALGPT_HISTORY_URL, tests/pg.py); `open_store()` opens
whichever the test runs on. Tests of the SQLite file itself are marked `sqlite_only`.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from localgpt_cli.history.short_ids import short_ids
from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import invoke, run_in_pty
from tests.standin import Reply


def db_path() -> Path:
    return Path(os.environ["LOCALGPT_HOME"]) / "history.db"


def open_store(clock=None) -> Any:
    url = os.environ.get("LOCALGPT_HISTORY_URL")
    if url:
        from localgpt_cli.history.postgres import PostgresStore

        return PostgresStore.open(url, clock=clock)
    return SQLiteStore.open(db_path(), clock=clock)


sqlite_only = pytest.mark.sqlite_only


@pytest.fixture(autouse=True, params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The history the test's commands use (the environment says which)."""
    monkeypatch.delenv("LOCALGPT_HISTORY_URL", raising=False)
    if request.param == "postgres":  # sqlite_only tests are deselected (tests/conftest.py)
        monkeypatch.setenv("LOCALGPT_HISTORY_URL", request.getfixturevalue("pg_url"))
    return str(request.param)


def aged(age: timedelta):
    return lambda: datetime.now(timezone.utc) - age


def make_tool_conversation() -> str:
    """A conversation with a system prompt, thinking, two tool calls answered out of
    order (matched by call id), a Markdown answer and an aborted one."""
    with open_store() as store:
        c = store.create_conversation("qwen3")
        store.add_message(c.id, "system", "be brief")
        store.add_message(c.id, "user", "what is 5+5 and the weather?\nthanks")
        store.add_message(
            c.id, "assistant", "", thinking="I should use tools.\n\nYes.",
            tool_calls=[
                {"id": "c1",
                 "function": {"name": "calculator", "arguments": {"expression": "5+5"}}},
                {"id": "c2", "function": {"name": "weather", "arguments": {"city": "Paris"}}},
            ],
        )
        store.add_message(c.id, "tool", "sunny, 21 °C", tool_name="weather", tool_call_id="c2")
        store.add_message(c.id, "tool", "10", tool_name="calculator", tool_call_id="c1")
        store.add_message(c.id, "assistant", "It is **10**, and sunny.",
                          metadata={"done_reason": "stop"})
        store.add_message(c.id, "user", "more about vpn please")
        store.add_message(c.id, "assistant", "VPN stands for",
                          metadata={"done_reason": "aborted"})
        return c.id


# -- empty history ---------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["history"], ["history", "--json"], ["--json", "history", "list"],
    ["history", "list", "-n", "5"], ["history", "search", "anything"],
])
def test_an_empty_history_is_a_friendly_line_on_stderr(isolated_env, args):
    r = invoke(*args)
    assert (r.exit_code, r.stdout) == (0, "")
    # --json keeps stderr for JSON lines (README.md, Output contract): the note is for people.
    friendly = 'No conversations yet. Start one with: localgpt chat "…"\n'
    assert r.stderr == ("" if "--json" in args else friendly)
    assert not db_path().exists()  # reading creates nothing


def test_an_empty_database_lists_nothing_too(isolated_env):
    open_store().close()
    r = invoke("history")
    assert (r.exit_code, r.stdout) == (0, "")
    assert "No conversations yet" in r.stderr


# -- list ------------------------------------------------------------------------------


def test_list_shows_conversations_made_by_chat_newest_first(standin):
    standin.script(Reply(content="Four."), Reply(content="Paris."), Reply(content="Sure."))
    first = invoke("chat", "--json", "-m", "qwen3", "what is 2+2?").records()[-1]["payload"]
    second = invoke("chat", "--json", "capital of France?").records()[-1]["payload"]
    invoke("chat", "-c", "and of Italy?")

    records = invoke("history", "--json").records()
    assert [r["id"] for r in records] == [second["conversation_id"], first["conversation_id"]]
    assert [(r["type"], r["title"], r["messages"], r["model"]) for r in records] == [
        ("conversation", "capital of France?", 4, "llama3.2"),
        ("conversation", "what is 2+2?", 2, "qwen3"),
    ]
    assert invoke("history", "list", "--json").records() == records
    assert invoke("--json", "history").records() == records

    r = invoke("history")
    assert r.exit_code == 0
    assert r.stdout == "ID\tTITLE\tMODEL\tMESSAGES\tUPDATED\n" + "".join(
        f"{c['id']}\t{c['title']}\t{c['model']}\t{c['messages']}\t{c['updated_at']}\n"
        for c in records
    )
    assert "\x1b[" not in r.stdout


def test_limit_keeps_the_newest_and_says_there_are_more(isolated_env):
    with open_store() as store:
        ids = [store.create_conversation("m", title=f"t{i}").id for i in range(5)]
    r = invoke("history", "-n", "2", "--json")
    assert [c["id"] for c in r.records()] == [ids[4], ids[3]]
    assert r.stderr == ""  # --json: no notes for people
    r = invoke("history", "list", "-n", "2")
    assert len(r.stdout.splitlines()) == 3
    assert r.stderr == "(showing the latest 2; -n 4 shows more)\n"
    assert invoke("history", "list", "-n", "5").stderr == ""
    r = invoke("history", "-n", "0")
    assert r.exit_code == 2


def test_short_ids_are_the_shortest_unique_prefixes(isolated_env):
    with open_store() as store:
        # Made within the same few milliseconds: they share more than 8 characters.
        ids = [store.create_conversation("m").id for _ in range(3)]
        short = short_ids(store, ids)
        for cid in ids:
            prefix = short[cid]
            assert cid.startswith(prefix) and len(prefix) >= 8
            assert store.resolve(prefix).id == cid
            if len(prefix) > 8:
                others = [o for o in ids if o != cid]
                assert any(o.startswith(prefix[:-1]) for o in others)
        assert len(set(short.values())) == 3


def test_a_terminal_gets_a_table_with_short_ids_and_rendered_transcripts(isolated_env):
    cid = make_tool_conversation()
    with open_store() as store:
        short = short_ids(store, [cid])[cid]
    code, screen = run_in_pty(["history"])
    assert code == 0
    assert short.encode() in screen and cid.encode() not in screen
    assert b"\x1b[1m" in screen  # bold header

    code, screen = run_in_pty(["history", "show", short])
    assert code == 0
    assert b"**10**" not in screen and b"10" in screen  # Markdown rendered
    assert "thinking: 25 chars — use --thinking to show".encode() in screen
    assert b'calculator(expression="5+5") -> 10' in screen
    assert b"(answer incomplete: aborted)" in screen

    code, screen = run_in_pty(["history", "search", "vpn"])
    assert code == 0
    assert b"\x1b[1;33mvpn\x1b[0m" in screen  # the matched word highlighted
    assert b"\xee\x80" not in screen  # no private-use marker leaks out


# -- show ------------------------------------------------------------------------------


def test_show_plain_transcript_folds_thinking_and_pairs_tool_calls(isolated_env):
    cid = make_tool_conversation()
    with open_store() as store:
        conv = store.get(cid)
    r = invoke("history", "show", cid)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        "# what is 5+5 and the weather?\n"
        f"id: {cid}  model: qwen3  messages: 8  updated: {conv.updated_at}\n"
        "\n## system\nbe brief\n"
        "\n## user\nwhat is 5+5 and the weather?\nthanks\n"
        "\n## assistant\nthinking: 25 chars — use --thinking to show\n"
        'calculator(expression="5+5") -> 10\n'
        'weather(city="Paris") -> sunny, 21 °C\n'
        "\n## assistant\nIt is **10**, and sunny.\n"
        "\n## user\nmore about vpn please\n"
        "\n## assistant\nVPN stands for\n(answer incomplete: aborted)\n"
    )
    shown = invoke("history", "show", "--thinking", "latest").stdout
    assert "thinking:\n> I should use tools.\n>\n> Yes.\ncalculator(" in shown
    assert "--thinking to show" not in shown


def test_show_json_writes_the_stored_message_records(isolated_env):
    cid = make_tool_conversation()
    with open_store() as store:
        expected = [m.to_record() for m in store.messages(cid)]
    for args in (["history", "show", "--json", cid[:12]], ["--json", "history", "show", "latest"]):
        r = invoke(*args)
        assert r.exit_code == 0
        assert r.records() == expected
    assert [x["role"] for x in expected].count("tool") == 2
    assert expected[2]["thinking"] == "I should use tools.\n\nYes."


def test_show_a_chat_made_conversation(standin):
    standin.script(Reply(thinking="hmm", content="Paris."), model="qwen3")
    invoke("chat", "-m", "qwen3", "capital of France?")
    r = invoke("history", "show", "latest")
    assert r.exit_code == 0
    body = r.stdout.split("\n\n", 1)[1]
    assert body == ("## user\ncapital of France?\n\n"
                    "## assistant · ollama:qwen3\n"
                    "thinking: 3 chars — use --thinking to show\nParis.\n")


def test_show_latest_with_no_history_exits_6(isolated_env):
    r = invoke("history", "show", "latest")
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr == ("localgpt: error: there are no conversations yet. "
                        '`localgpt chat "…"` starts one.\n')


# -- search ----------------------------------------------------------------------------


def test_search_text_and_json(isolated_env):
    cid = make_tool_conversation()
    with open_store(clock=aged(timedelta(days=3))) as store:
        other = store.create_conversation("m")
        store.add_message(other.id, "user", "my VPN drops every hour")

    records = invoke("history", "search", "--json", "vpn").records()
    found = {(h["conversation_id"], h["seq"]) for h in records}
    assert found == {(cid, 6), (cid, 7), (other.id, 0)}
    assert [h["rank"] for h in records] == [1, 2, 3]
    assert all(h["type"] == "search_hit" for h in records)
    by_seq = {(h["conversation_id"], h["seq"]): h for h in records}
    assert by_seq[(other.id, 0)]["snippet"] == "my **VPN** drops every hour"
    assert by_seq[(cid, 6)]["title"] == "what is 5+5 and the weather?"

    r = invoke("history", "search", "vpn", "drops")
    line = "my VPN drops every hour"
    assert r.stdout == ("RANK\tCONVERSATION\tSEQ\tROLE\tTITLE\tSNIPPET\n"
                        f"1\t{other.id}\t0\tuser\t{line}\t{line}\n")
    assert len(invoke("history", "search", "-n", "1", "--json", "vpn").records()) == 1


def test_search_without_a_match_is_not_an_error(isolated_env):
    make_tool_conversation()
    r = invoke("history", "search", "kangaroo")
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == "No messages match 'kangaroo'.\n"
    assert invoke("history", "search", "--json", "kangaroo").stdout == ""


@pytest.mark.parametrize("text", ['"', "*", "-", "vpn*", '"vpn', "NOT", "a OR", "(vpn",
                                  "col:vpn", "vpn AND", "NEAR(vpn please)", "'; DROP TABLE x"])
def test_search_takes_any_text_literally(isolated_env, text):
    make_tool_conversation()
    r = invoke("history", "search", "--json", "--", text)
    assert r.exit_code == 0, r.stderr
    assert "Traceback" not in r.stderr and "syntax" not in r.stderr
    for hit in r.records():
        assert hit["type"] == "search_hit"
    with open_store() as store:
        assert len(store.messages(store.latest().id)) == 8


def test_search_punctuation_around_words_still_finds_them(isolated_env):
    make_tool_conversation()
    for text in ("-vpn", '"vpn"', "vpn*", "(vpn)"):
        assert len(invoke("history", "search", "--json", "--", text).records()) == 2, text


def test_search_for_nothing_is_a_usage_error(isolated_env):
    make_tool_conversation()
    r = invoke("history", "search", "  ")
    assert r.exit_code == 2 and "empty" in r.stderr
    assert invoke("history", "search").exit_code == 2


# -- rm --------------------------------------------------------------------------------


def test_rm_without_a_terminal_refuses_unless_yes(standin):
    invoke("chat", "first question")
    keep = invoke("chat", "--json", "second question").records()[-1]["payload"]
    gone = invoke("history", "--json").records()[-1]

    r = invoke("history", "rm", gone["id"])
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == ("localgpt: error: refusing to delete 1 conversation without "
                        "confirmation: stdin is not a terminal. Pass -y to do it without asking.\n")
    assert len(invoke("history", "--json").records()) == 2

    r = invoke("history", "rm", "-y", gone["id"][:10])
    assert r.exit_code == 0
    assert r.stdout == f"removed {gone['id']}  first question (2 messages)\n"
    assert [c["id"] for c in invoke("history", "--json").records()] == [keep["conversation_id"]]
    with open_store() as store:
        assert store.search("first") == []  # messages and index entries went too


def test_rm_json_records_and_all_or_nothing(isolated_env):
    with open_store() as store:
        a = store.create_conversation("m", title="alpha")
        b = store.create_conversation("m", title="beta")
        store.add_message(b.id, "user", "hi")
    r = invoke("history", "rm", "-y", a.id, "ZZZZZZZZ")
    assert r.exit_code == 6 and "ZZZZZZZZ" in r.stderr
    assert len(invoke("history", "--json").records()) == 2

    r = invoke("history", "rm", "--yes", "--json", a.id, b.id, a.id)
    assert r.exit_code == 0
    assert [(x["type"], x["status"], x["id"], x["title"], x["messages"]) for x in r.records()] == [
        ("conversation", "removed", a.id, "alpha", 0),
        ("conversation", "removed", b.id, "beta", 1),
    ]
    assert invoke("history", "--json").stdout == ""


def test_rm_on_a_terminal_asks_and_no_keeps_it(isolated_env):
    with open_store() as store:
        cid = store.create_conversation("m", title="precious").id
    code, screen = run_in_pty(["history", "rm", cid], answer=b"n\n")
    assert code == 0, screen
    assert f"{cid}  precious (0 messages)".encode() in screen
    assert b"Delete 1 conversation? [y/N]" in screen and b"Nothing deleted." in screen
    with open_store() as store:
        assert store.get(cid).title == "precious"

    code, screen = run_in_pty(["history", "rm", cid], answer=b"y\n")
    assert code == 0, screen
    assert f"removed {cid}".encode() in screen
    with open_store() as store:
        assert store.latest() is None


# -- prune -----------------------------------------------------------------------------


def make_aged(*ages: timedelta) -> list[str]:
    ids = []
    for age in ages:
        with open_store(clock=aged(age)) as store:
            c = store.create_conversation("m", title=f"{age}")
            store.add_message(c.id, "user", "x")
            ids.append(c.id)
    return ids


def test_prune_removes_only_old_conversations(isolated_env):
    old, recent = make_aged(timedelta(days=40), timedelta(days=1))
    r = invoke("history", "prune", "--older-than", "30d")
    assert r.exit_code == 2 and "-y" in r.stderr
    assert len(invoke("history", "--json").records()) == 2

    r = invoke("history", "prune", "--older-than", "30d", "-y")
    assert (r.exit_code, r.stdout) == (0, "removed 1 conversation not updated for 30 days\n")
    assert [c["id"] for c in invoke("history", "--json").records()] == [recent]
    r = invoke("history", "prune", "--older-than", "30d", "-y")
    assert r.stdout == "removed 0 conversations not updated for 30 days\n"


@pytest.mark.parametrize(("age", "removed"), [("90m", 4), ("12h", 3), ("2w", 2), ("30d", 1),
                                              ("1W", 2)])
def test_prune_durations(isolated_env, age, removed):
    make_aged(timedelta(hours=2), timedelta(days=2), timedelta(days=20), timedelta(days=60),
              timedelta(minutes=1))
    r = invoke("history", "prune", "--json", "--older-than", age, "-y")
    assert r.exit_code == 0, r.stderr
    (record,) = r.records()
    assert record["type"] == "summary" and record["removed"] == removed
    assert record["older_than_seconds"] == {"90m": 5400, "12h": 43200, "2w": 1209600,
                                            "30d": 2592000, "1W": 604800}[age]
    assert record["cutoff"].endswith("Z")
    assert len(invoke("history", "--json").records()) == 5 - removed


@pytest.mark.parametrize("age", ["30", "d", "-1d", "1.5d", "0d", "30 days", "3y", "",
                                 "99999999999w"])
def test_prune_rejects_bad_durations_as_usage_errors(isolated_env, age):
    make_aged(timedelta(days=400))
    r = invoke("history", "prune", "-y", "--older-than", age)
    assert r.exit_code == 2
    assert "--older-than" in r.stderr and r.stdout == ""
    assert len(invoke("history", "--json").records()) == 1


def test_prune_without_a_database_creates_none(isolated_env):
    r = invoke("history", "prune", "--older-than", "1d", "-y")
    assert (r.exit_code, r.stdout) == (0, "removed 0 conversations not updated for 1 day\n")
    assert not db_path().exists()


def test_prune_on_a_terminal_asks(isolated_env):
    make_aged(timedelta(days=40), timedelta(days=41))
    code, screen = run_in_pty(["history", "prune", "--older-than", "30d"], answer=b"y\n")
    assert code == 0, screen
    assert b"Delete 2 conversations not updated for 30 days? [y/N]" in screen
    assert b"removed 2 conversations" in screen
    assert invoke("history", "--json").stdout == ""


# -- export ----------------------------------------------------------------------------


def test_export_json_and_markdown_to_stdout(isolated_env):
    cid = make_tool_conversation()
    with open_store() as store:
        as_json = store.export(cid, "json")
        as_markdown = store.export(cid, "markdown")
    r = invoke("history", "export", cid[:9])
    assert (r.exit_code, r.stdout) == (0, as_json)
    document = json.loads(r.stdout)
    assert document["conversation"]["id"] == cid and len(document["messages"]) == 8
    r = invoke("history", "export", "latest", "--format", "markdown")
    assert (r.exit_code, r.stdout) == (0, as_markdown)
    assert r.stdout.startswith("# what is 5+5 and the weather?\n")
    assert invoke("history", "export", cid, "--format", "yaml").exit_code == 2


def test_export_to_a_file(isolated_env, tmp_path):
    cid = make_tool_conversation()
    with open_store() as store:
        as_markdown = store.export(cid, "markdown")
    target = tmp_path / "chat.md"
    r = invoke("history", "export", cid, "-f", "markdown", "-o", str(target))
    assert (r.exit_code, r.stdout) == (0, "")
    size = len(as_markdown.encode())
    assert r.stderr == f"Wrote {size:,} bytes to {target}.\n"
    assert target.read_text(encoding="utf-8") == as_markdown
    assert stat.S_IMODE(target.stat().st_mode) == 0o600

    r = invoke("history", "export", cid, "--json", "-o", str(tmp_path / "c.json"))
    assert r.records() == [{"type": "export", "conversation_id": cid, "format": "json",
                            "path": str(tmp_path / "c.json"),
                            "bytes": (tmp_path / "c.json").stat().st_size}]
    r = invoke("history", "export", cid, "-o", str(tmp_path / "missing" / "c.json"))
    assert r.exit_code == 6 and "missing" in r.stderr


def test_export_json_mode_without_a_file_carries_the_document(isolated_env):
    cid = make_tool_conversation()
    (record,) = invoke("history", "--json", "export", cid, "-f", "markdown").records()
    with open_store() as store:
        assert record["content"] == store.export(cid, "markdown")
    assert (record["type"], record["path"], record["bytes"]) == (
        "export", None, len(record["content"].encode()))


# -- ids that name nothing or too much ------------------------------------------------


@pytest.mark.parametrize("command", [["show"], ["export"], ["rm", "-y"]])
def test_an_ambiguous_id_lists_the_candidates_on_one_line(isolated_env, command):
    with open_store() as store:
        a = store.create_conversation("m", title="two\nlines")
        b = store.create_conversation("m", title="other")
    r = invoke("history", *command, "0")  # every id of this century starts with 0
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("localgpt: error: ")
    assert a.id in r.stderr and b.id in r.stderr and "two lines" in r.stderr
    (error,) = invoke("history", *command, "--json", "0").records()
    assert error["type"] == "error" and error["code"] == "ambiguous_id"
    assert len(invoke("history", "--json").records()) == 2


@pytest.mark.parametrize("command", [["show"], ["export"], ["rm", "-y"]])
def test_an_unknown_id_exits_6(isolated_env, command):
    make_tool_conversation()
    r = invoke("history", *command, "ZZZZZZZZ")
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr == ("localgpt: error: no conversation has an id starting with "
                        "'ZZZZZZZZ'. `localgpt history` lists them.\n")


# -- a damaged database ---------------------------------------------------------------


ALL_COMMANDS = [
    ["history"], ["history", "--json"], ["history", "show", "latest"],
    ["history", "search", "vpn"], ["history", "rm", "-y", "01"],
    ["history", "export", "latest"], ["history", "prune", "--older-than", "1d", "-y"],
]


@sqlite_only
@pytest.mark.parametrize("args", ALL_COMMANDS)
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(isolated_env, args):
    path = db_path()
    content = b"these are my notes, not a database\n" * 50
    path.write_bytes(content)
    r = invoke(*args)
    assert r.exit_code == 6
    assert f"history database {path} is not a SQLite database" in r.stderr
    assert r.stderr.count("\n") == 1
    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == ["history.db"]


@sqlite_only
@pytest.mark.parametrize("args", ALL_COMMANDS)
def test_a_truncated_database_is_refused_and_left_alone(isolated_env, args):
    make_tool_conversation()
    with open_store() as store:  # enough rows for many pages
        cid = store.create_conversation("m").id
        for n in range(200):
            store.add_message(cid, "user", f"message {n} " + "words " * 100)
    path = db_path()
    # Closing the last connection checkpointed the WAL into the file and removed it
    # (and recorded the file as checked, a record the truncation below invalidates).
    assert sorted(p.name for p in path.parent.iterdir()) == ["history.db", "history.db-checked"]
    content = path.read_bytes()[: len(path.read_bytes()) // 2 + 100]
    path.write_bytes(content)
    r = invoke(*args)
    assert r.exit_code == 6
    assert f"history database {path} is damaged" in r.stderr
    assert path.read_bytes() == content


# -- help ------------------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["", "list", "show", "search", "rm", "export", "prune"])
def test_help_has_examples(sub):
    args = ["history", sub, "--help"] if sub else ["history", "--help"]
    r = invoke(*args)
    assert r.exit_code == 0
    assert "localgpt history" in r.stdout.split("Example", 1)[1]


def test_history_is_listed_in_the_top_level_help():
    assert "history" in invoke("--help").stdout
