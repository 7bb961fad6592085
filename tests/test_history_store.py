"""The conversation store: what is stored, found, searched, refused and exported.

The behaviour tests run on every backend (the `store` and `opener` fixtures are
parametrised): a real SQLite file under tmp_path, a fresh database on a real PostgreSQL
server (tests/pg.py), and the in-memory store. Raw sqlite3 / SQL is used only to look
inside (index rows, schema version) or to prepare a database that localgpt itself would
never write (another program's, a newer version's). The tests of the file itself
(damage, locking, modes) are SQLite's alone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from localgpt_cli.errors import (
    EXIT_INVALID,
    AmbiguousId,
    InvalidInput,
    LockBusy,
    NotFound,
    UsageError,
)
from localgpt_cli.history import connection, search
from localgpt_cli.history.memory import MemoryStore
from localgpt_cli.history.schema import APPLICATION_ID, SCHEMA_VERSION
from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.ids import ALPHABET, new_id, normalize_prefix

REPO = Path(__file__).resolve().parent.parent


class Clock:
    """A settable clock, so that tests can make conversations of a given age."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "home" / "history.db"


BACKENDS = ["sqlite", "postgres", "memory"]


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, db: Path, clock: Clock) -> Callable[..., Any]:
    """Opens the backend's store on the same data each time it is called (the memory
    store's data is the store itself, so it hands back the same one)."""
    if request.param == "sqlite":
        return lambda clock=clock: SQLiteStore.open(db, clock=clock)
    if request.param == "postgres":
        from localgpt_cli.history.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")
        return lambda clock=clock: PostgresStore.open(url, clock=clock)
    memory = MemoryStore(clock=clock)
    return lambda clock=clock: memory


@pytest.fixture
def store(opener: Callable[..., Any]):
    with opener() as s:
        yield s


def indexed(store: Any, word: str) -> int:
    """How many messages the backend's search index holds `word` for (looked up inside
    the index itself, not through search())."""
    if isinstance(store, SQLiteStore):
        fts_integrity(store.path)
        return fts_index_rows(store.path, word)
    if isinstance(store, MemoryStore):
        return sum(words.count(word) > 0 for conv in store._conversations.values()
                   for words in conv.words)  # fmt: skip
    return int(store._conn.execute(
        "SELECT count(*) FROM localgpt_messages WHERE search @@ to_tsquery('simple', %s)",
        (word,)).fetchone()[0])  # fmt: skip


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def fts_index_rows(path: Path, word: str) -> int:
    """Entries for `word` in the full-text index itself (not joined to messages)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (f'"{word}"',)
        ).fetchone()[0]
    finally:
        conn.close()


def fts_integrity(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


# -- ids ------------------------------------------------------------------------------


def test_ids_are_26_crockford_chars_and_strictly_increasing():
    ids = [new_id() for _ in range(5000)]
    assert all(len(i) == 26 and set(i) <= set(ALPHABET) for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_id_prefix_reading_follows_crockford():
    assert normalize_prefix(" 01jdx ") == "01JDX"
    assert normalize_prefix("0iLo") == "0110"
    assert normalize_prefix("01U") is None  # U is not in the alphabet
    assert normalize_prefix("") is None
    assert normalize_prefix("0" * 27) is None


# -- storing and reading back -----------------------------------------------------------


def test_every_field_survives_a_round_trip_through_the_store(opener, clock: Clock):
    calls = [{"function": {"name": "calculator", "arguments": {"expression": "2+2"}}}]
    meta = {"sources": [{"path": "notes/vpn.md", "chunk": 3}], "usage": {"prompt_tokens": 9}}
    with opener() as s:
        conv = s.create_conversation("qwen3:8b", title="Sums", metadata={"system": "be brief"})
        user = s.add_message(conv.id, "user", "what is 2+2? ✓")
        clock.advance(seconds=1)
        assistant = s.add_message(
            conv.id,
            "assistant",
            "",
            thinking="The user wants arithmetic.",
            tool_calls=calls,
            metadata=meta,
            reply_to=user.id,
        )
        tool = s.add_message(conv.id, "tool", "4", tool_name="calculator", tool_call_id="call_1")
    with opener(clock=None) as s:
        again = s.get(conv.id)
        stored = s.messages(conv.id)
    assert again == conv.__class__(
        conv.id, "Sums", "qwen3:8b", 3, conv.created_at, tool.created_at, {"system": "be brief"}
    )
    assert stored == [user, assistant, tool]
    assert stored[1].thinking == "The user wants arithmetic."
    assert stored[1].tool_calls == calls
    assert stored[1].metadata == meta
    assert (stored[2].tool_name, stored[2].tool_call_id) == ("calculator", "call_1")
    assert stored[0].created_at == "2026-03-01T12:00:00.000Z"
    assert stored[1].created_at == "2026-03-01T12:00:01.000Z"
    assert stored[1].to_record() == {
        "type": "message",
        "id": assistant.id,
        "conversation_id": conv.id,
        "seq": 1,
        "role": "assistant",
        "content": "",
        "thinking": "The user wants arithmetic.",
        "tool_calls": calls,
        "tool_name": None,
        "tool_call_id": None,
        "metadata": meta,
        "created_at": "2026-03-01T12:00:01.000Z",
        "reply_to": user.id,
    }


def test_a_conversation_starts_with_its_first_question(store: SQLiteStore):
    question = store.start_conversation("llama3.2", "  first line of it\nmore")
    (conv,) = store.list_conversations()
    assert (conv.id, conv.title, conv.model, conv.messages) == (
        question.conversation_id, "first line of it", "llama3.2", 1)
    assert store.messages(conv.id) == [question] and question.seq == 0
    answer = store.add_message(conv.id, "assistant", "ok", reply_to=question.id)
    assert store.get_message(answer.id).reply_to == question.id


def test_conversation_record_has_the_protocol_keys(store: SQLiteStore):
    conv = store.create_conversation("llama3.2")
    store.add_message(conv.id, "user", "hi")
    record = store.list_conversations()[0].to_record()
    assert list(record) == [
        "type", "id", "title", "created_at", "updated_at", "messages", "model",
    ]  # fmt: skip
    assert (record["type"], record["messages"], record["title"]) == ("conversation", 1, "hi")


def test_seqs_count_from_zero_and_last_n_keeps_order(store: SQLiteStore):
    conv = store.create_conversation("m")
    for i in range(7):
        store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"message {i}")
    everything = store.messages(conv.id)
    assert [m.seq for m in everything] == list(range(7))
    assert [m.content for m in store.messages(conv.id, last=3)] == [
        "message 4",
        "message 5",
        "message 6",
    ]
    assert store.messages(conv.id, last=100) == everything
    assert store.messages(conv.id, last=0) == []


def test_appending_to_an_unknown_conversation_is_not_found(store: SQLiteStore):
    with pytest.raises(NotFound) as err:
        store.add_message("01AAAAAAAAAAAAAAAAAAAAAAAA", "user", "hello")
    assert err.value.exit_code == EXIT_INVALID
    with pytest.raises(ValueError):
        store.add_message(store.create_conversation("m").id, "robot", "beep")


def test_update_metadata_merges_removes_and_leaves_the_rest(store: SQLiteStore):
    conv = store.create_conversation("m")
    store.add_message(conv.id, "user", "remember the walrus")
    message = store.add_message(
        conv.id, "assistant", "noted", metadata={"done_reason": "stop", "model": "m"}
    )
    updated = store.update_metadata(message.id, {"important": True, "model": None})
    assert updated.metadata == {"done_reason": "stop", "important": True}
    assert store.get_message(message.id) == updated
    assert (updated.content, updated.seq, updated.created_at) == ("noted", 1, message.created_at)
    assert store.update_metadata(message.id, {"gone": None}).metadata == updated.metadata
    assert [h.message_id for h in store.search("walrus")] == [store.messages(conv.id)[0].id]
    assert indexed(store, "noted") == 1


def test_update_metadata_of_an_unknown_message_is_not_found(store: SQLiteStore):
    with pytest.raises(NotFound) as err:
        store.update_metadata("01AAAAAAAAAAAAAAAAAAAAAAAA", {"important": True})
    assert err.value.exit_code == EXIT_INVALID
    assert "01AAAAAAAAAAAAAAAAAAAAAAAA" in str(err.value)


def test_a_message_is_named_by_a_unique_prefix_of_its_id(store: SQLiteStore):
    """`history mark` takes what a person types: any unique prefix, in any case, of a
    message id in any conversation; one that names several lists them, one that names
    none says so, and neither changes anything."""
    first, second = store.create_conversation("m"), store.create_conversation("m")
    said = [store.add_message(first.id, "user", "the build server is atlas-7"),
            store.add_message(second.id, "assistant", "noted, atlas-7"),
            store.add_message(second.id, "user", "")]  # fmt: skip
    target = said[1]
    n = next(k for k in range(1, 27)
             if not any(m.id.startswith(target.id[:k]) for m in said if m != target))  # fmt: skip
    assert store.resolve_message(target.id[:n].lower()) == target
    assert store.resolve_message(f"  {target.id}  ") == store.get_message(target.id)
    common = os.path.commonprefix([m.id for m in said])
    with pytest.raises(AmbiguousId) as err:
        store.resolve_message(common)
    assert err.value.exit_code == EXIT_INVALID and err.value.code == "ambiguous_id"
    assert err.value.candidates == sorted((m.id for m in said), reverse=True)
    assert "(assistant: noted, atlas-7)" in str(err.value) and "(user: empty)" in str(err.value)
    assert "\n" not in str(err.value)
    for unknown in ["ZZZZZZZZ", "not-an-id!", first.id]:  # a conversation id is not a message's
        with pytest.raises(NotFound) as missing:
            store.resolve_message(unknown)
        assert missing.value.exit_code == EXIT_INVALID and repr(unknown) in str(missing.value)
    with pytest.raises(InvalidInput):
        store.resolve_message("  ")
    assert [m.metadata for m in said] == [store.get_message(m.id).metadata for m in said]


def test_import_keeps_ids_adds_only_what_is_missing_and_refuses_conflicts(opener, clock):
    source = MemoryStore(clock=clock)
    conv = source.create_conversation("qwen3", metadata={"system": "terse"})
    first = [source.add_message(conv.id, "user", "zebra one"),
             source.add_message(conv.id, "assistant", "ok", metadata={"important": True})]
    with opener() as store:
        assert store.import_conversation(source.get(conv.id), first) == 2
        assert store.import_conversation(source.get(conv.id), first) == 0
        assert store.messages(conv.id) == first
        assert store.get(conv.id) == source.get(conv.id)
        later = source.add_message(conv.id, "user", "zebra two")
        assert store.import_conversation(source.get(conv.id), [*first, later]) == 1
        assert [h.message_id for h in store.search("zebra two")] == [later.id]
        assert store.get(conv.id).messages == 3
        assert store.add_message(conv.id, "assistant", "next").seq == 3
        clash = replace(later, id=new_id(), seq=3, content="not the same")
        with pytest.raises(InvalidInput) as err:
            store.import_conversation(source.get(conv.id), [*first, later, clash])
        assert conv.id in str(err.value)
        assert [m.content for m in store.messages(conv.id)] == [
            "zebra one", "ok", "zebra two", "next"]


# -- titles -------------------------------------------------------------------------------


def test_title_comes_from_the_first_user_message_first_line(store: SQLiteStore):
    conv = store.create_conversation("m")
    store.add_message(conv.id, "system", "You are terse.")
    assert store.get(conv.id).title is None
    store.add_message(conv.id, "user", "   \n\n  Why   is the sky blue?  \nExplain.")
    store.add_message(conv.id, "user", "And the sea?")
    assert store.get(conv.id).title == "Why is the sky blue?"


def test_long_first_line_is_cut_to_60_characters(store: SQLiteStore):
    conv = store.create_conversation("m")
    store.add_message(conv.id, "user", "word " * 40)
    title = store.get(conv.id).title
    assert title is not None and len(title) == 60 and title.endswith("…")
    assert title.startswith("word word")


def test_blank_first_message_leaves_the_title_to_the_next(store: SQLiteStore):
    conv = store.create_conversation("m")
    store.add_message(conv.id, "user", " \n ")
    assert store.get(conv.id).title is None
    store.add_message(conv.id, "user", "second try")
    assert store.get(conv.id).title == "second try"


def test_a_given_title_is_kept(store: SQLiteStore):
    conv = store.create_conversation("m", title="  Mine  ")
    store.add_message(conv.id, "user", "something else")
    assert store.get(conv.id).title == "Mine"


# -- finding conversations ---------------------------------------------------------------


def test_a_unique_prefix_in_any_case_resolves(store: SQLiteStore):
    convs = [store.create_conversation("m") for _ in range(3)]
    target = convs[1]
    # The shortest prefix that no other id shares, plus one character.
    n = next(
        k
        for k in range(1, 27)
        if all(not c.id.startswith(target.id[:k]) for c in convs if c != target)
    )
    assert store.resolve(target.id[:n].lower()).id == target.id
    assert store.resolve(target.id) == store.get(target.id)


def test_an_ambiguous_prefix_lists_the_candidates(store: SQLiteStore):
    first = store.create_conversation("m", title="first")
    second = store.create_conversation("m", title="second")
    common = os.path.commonprefix([first.id, second.id])
    with pytest.raises(AmbiguousId) as err:
        store.resolve(common)
    assert err.value.exit_code == EXIT_INVALID
    assert err.value.code == "ambiguous_id"
    assert set(err.value.candidates) == {first.id, second.id}
    message = str(err.value)
    assert first.id in message and second.id in message and "(second)" in message


def test_unknown_ids_are_not_found(store: SQLiteStore):
    store.create_conversation("m")
    for reference in ["ZZZZZZZZ", "not-an-id!", "01U"]:
        with pytest.raises(NotFound) as err:
            store.resolve(reference)
        assert err.value.exit_code == EXIT_INVALID
        assert repr(reference) in str(err.value)
    with pytest.raises(InvalidInput):
        store.resolve("   ")


def test_latest_is_the_most_recently_updated(store: SQLiteStore, clock: Clock):
    assert store.latest() is None
    with pytest.raises(NotFound):
        store.resolve("latest")
    older = store.create_conversation("m")
    clock.advance(minutes=1)
    newer = store.create_conversation("m")
    assert store.resolve("latest").id == newer.id
    clock.advance(minutes=1)
    store.add_message(older.id, "user", "back to this one")
    latest = store.latest()
    assert latest is not None and latest.id == older.id
    assert store.resolve("LATEST").id == older.id


def test_list_is_newest_first_with_message_counts(store: SQLiteStore, clock: Clock):
    convs = []
    for i in range(5):
        conv = store.create_conversation(f"model-{i}")
        for j in range(i):
            store.add_message(conv.id, "user", f"m{j}")
        convs.append(conv)
        clock.advance(minutes=1)
    listed = store.list_conversations()
    assert [c.id for c in listed] == [c.id for c in reversed(convs)]
    assert [c.messages for c in listed] == [4, 3, 2, 1, 0]
    assert [c.model for c in listed] == ["model-4", "model-3", "model-2", "model-1", "model-0"]
    assert [c.id for c in store.list_conversations(limit=2, offset=1)] == [convs[3].id, convs[2].id]


# -- search -------------------------------------------------------------------------------


@pytest.fixture
def searchable(store: SQLiteStore):
    conv = store.create_conversation("m")
    texts = [
        "How do I set up the VPN on my laptop?",
        'Run "vpnc --config work.conf" then type the token: 1234',
        "The café serves naïve crêpes in Zürich",
        "AND OR NOT are words here, not operators; -x and *glob* too",
        "東京 の 天気",
    ]
    for text in texts:
        store.add_message(conv.id, "user", text)
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("vpn", [0]),
        ("VPN laptop", [0]),
        ('"vpnc', [1]),
        ('token: "1234"', [1]),
        ("cafe naive", [2]),  # accents ignored both ways
        ("zurich", [2]),
        ("crêpes", [2]),
        ("AND", [3]),
        ("NOT operators", [3]),
        ("-x", [3]),
        ("*glob*", [3]),
        ("東京", [4]),
        ("NEAR(", []),
        ('"', []),
        ("- * : ( )", []),  # words without letters or digits match nothing
        ("vpn zürich", []),  # all words must match
    ],
)
def test_search_takes_any_text_literally(searchable: SQLiteStore, query, expected):
    conv_messages = searchable.messages(searchable.latest().id)  # type: ignore[union-attr]
    hits = searchable.search(query)
    assert sorted(h.seq for h in hits) == [conv_messages[i].seq for i in expected]


def test_search_hits_carry_snippet_rank_and_conversation(searchable: SQLiteStore):
    hits = searchable.search("vpn")
    assert len(hits) == 1
    hit = hits[0]
    assert hit.snippet == "How do I set up the **VPN** on my laptop?"
    assert hit.title == "How do I set up the VPN on my laptop?"
    record = hit.to_record()
    assert record["type"] == "search_hit" and record["rank"] == 1
    assert searchable.search("vpn", highlight=("[", "]"))[0].snippet.count("[VPN]") == 1


def test_empty_search_is_invalid_input(searchable: SQLiteStore):
    for text in ["", "   ", "\x00"]:
        with pytest.raises(InvalidInput):
            searchable.search(text)


def test_search_ranks_and_limits(store: SQLiteStore):
    conv = store.create_conversation("m")
    store.add_message(conv.id, "user", "kernel " + "filler " * 50)
    best = store.add_message(conv.id, "user", "kernel kernel kernel")
    for _ in range(30):
        store.add_message(conv.id, "user", "a kernel among other words here")
    hits = store.search("kernel", limit=5)
    assert len(hits) == 5 and hits[0].message_id == best.id
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]


def test_search_ranks_only_the_newest_matches_of_a_common_word(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
):
    conv = store.create_conversation("m")
    oldest_best = store.add_message(conv.id, "user", "ping ping ping")
    newer = [store.add_message(conv.id, "user", f"ping number {i} of many") for i in range(5)]
    assert store.search("ping")[0].message_id == oldest_best.id
    monkeypatch.setattr(search, "SEARCH_WINDOW", 3)
    assert {h.message_id for h in store.search("ping")} == {m.id for m in newer[-3:]}
    # Fewer matches than the window: all of them are ranked.
    assert [h.message_id for h in store.search("number 1")] == [newer[1].id]


# -- deleting -----------------------------------------------------------------------------


def test_delete_removes_messages_and_index_entries(store: SQLiteStore):
    keep = store.create_conversation("m")
    store.add_message(keep.id, "user", "zebra stays")
    gone = store.create_conversation("m")
    doomed = [store.add_message(gone.id, "user", f"zebra leaves {i}") for i in range(3)]
    assert indexed(store, "zebra") == 4
    assert store.delete([gone.id, gone.id]) == 1
    with pytest.raises(NotFound):
        store.get(gone.id)
    for message in doomed:
        with pytest.raises(NotFound):
            store.get_message(message.id)
    assert indexed(store, "zebra") == 1
    assert indexed(store, "leaves") == 0
    assert [h.conversation_id for h in store.search("zebra")] == [keep.id]


def test_delete_with_an_unknown_id_deletes_nothing(store: SQLiteStore):
    conv = store.create_conversation("m")
    with pytest.raises(NotFound) as err:
        store.delete([conv.id, "01AAAAAAAAAAAAAAAAAAAAAAAA"])
    assert "01AAAAAAAAAAAAAAAAAAAAAAAA" in str(err.value)
    assert store.get(conv.id).id == conv.id


def test_prune_deletes_by_last_update(store: SQLiteStore, clock: Clock):
    old = store.create_conversation("m")
    store.add_message(old.id, "user", "ancient words")
    revived = store.create_conversation("m")
    clock.advance(days=40)
    store.add_message(revived.id, "user", "touched recently")
    recent = store.create_conversation("m")
    clock.advance(days=1)
    assert store.prune(timedelta(days=30)) == 1
    assert {c.id for c in store.list_conversations()} == {revived.id, recent.id}
    assert indexed(store, "ancient") == 0
    assert store.prune(timedelta(days=30)) == 0
    with pytest.raises(InvalidInput):
        store.prune(timedelta(days=-1))


# -- export -------------------------------------------------------------------------------


@pytest.fixture
def exported(store: SQLiteStore):
    conv = store.create_conversation("qwen3:8b", metadata={"system": "terse"})
    store.add_message(conv.id, "user", "What is 6*7?")
    store.add_message(
        conv.id,
        "assistant",
        "",
        thinking="Use the calculator.",
        tool_calls=[{"function": {"name": "calculator", "arguments": {"expression": "6*7"}}}],
    )
    store.add_message(conv.id, "tool", "```42```", tool_name="calculator")
    store.add_message(
        conv.id,
        "assistant",
        "It is 4",
        metadata={"done_reason": "aborted"},
    )
    return store, conv


def test_export_json_holds_every_field(exported):
    store, conv = exported
    document = json.loads(store.export(conv.id, "json"))
    assert document["conversation"]["id"] == conv.id
    assert document["conversation"]["metadata"] == {"system": "terse"}
    assert document["conversation"]["messages"] == 4
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert document["messages"] == [m.to_record() for m in store.messages(conv.id)]


def test_export_markdown_reads_like_the_chat(exported):
    store, conv = exported
    text = store.export(conv.id, format="markdown")
    assert text.startswith("# What is 6*7?\n")
    assert f"- id: `{conv.id}`" in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## User", "## Assistant", "## Tool: calculator", "## Assistant"]
    assert "<details>\n<summary>Thinking</summary>\n\nUse the calculator.\n\n</details>" in text
    assert '**Tool call:** `calculator`\n\n```json\n{\n  "expression": "6*7"\n}\n```' in text
    # The tool output holds backticks, so its fence is longer than theirs.
    assert "````text\n```42```\n````" in text
    assert "_(answer incomplete: aborted)_" in text


def test_export_of_an_unknown_format_or_id_is_refused(exported):
    store, conv = exported
    with pytest.raises(UsageError):
        store.export(conv.id, "yaml")
    with pytest.raises(NotFound):
        store.export("01AAAAAAAAAAAAAAAAAAAAAAAA")


# -- the file -----------------------------------------------------------------------------


def test_new_database_and_its_wal_files_are_private(db: Path):
    with SQLiteStore.open(db) as s:
        s.add_message(s.create_conversation("m").id, "user", "secret")
        for path in [db, db.with_name("history.db-wal"), db.with_name("history.db-shm")]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def assert_refused_untouched(path: Path, *words: str) -> InvalidInput:
    before = path.read_bytes()
    siblings = side_files(path)
    with pytest.raises(InvalidInput) as err:
        SQLiteStore.open(path)
    assert err.value.exit_code == EXIT_INVALID
    assert str(path) in str(err.value)
    for word in words:
        assert word in str(err.value)
    assert path.read_bytes() == before
    assert side_files(path) == siblings
    return err.value


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "history.db"
    path.write_bytes(b"these are my notes, not a database\n" * 10)
    assert_refused_untouched(path, "not a SQLite database")
    short = tmp_path / "short.db"
    short.write_bytes(b"SQLite format 3\x00")
    assert_refused_untouched(short, "not a SQLite database")


@pytest.fixture
def filled(db: Path) -> Path:
    with SQLiteStore.open(db) as s:
        conv = s.create_conversation("m")
        for i in range(300):
            s.add_message(conv.id, "user", f"message number {i} " + "padding " * 40)
    # The last close checkpointed and removed -wal/-shm, and recorded the file as checked.
    assert side_files(db) == ["history.db-checked"]
    return db


def test_a_truncated_database_is_refused_untouched(filled: Path):
    data = filled.read_bytes()
    filled.write_bytes(data[: len(data) // 2])
    assert_refused_untouched(filled, "truncated")
    filled.write_bytes(data[: len(data) - 100])
    assert_refused_untouched(filled, "truncated")


def test_a_database_with_a_scrambled_schema_is_refused_untouched(filled: Path):
    data = bytearray(filled.read_bytes())
    data[100:4096] = bytes(range(256)) * 15 + bytes(range(236))
    filled.write_bytes(bytes(data))
    assert_refused_untouched(filled, "damaged")


def test_damage_found_by_a_query_is_invalid_input_naming_the_file(filled: Path):
    data = bytearray(filled.read_bytes())
    page = 4096
    data[page:] = b"\xff" * (len(data) - page)  # every page but the first (the schema)
    filled.write_bytes(bytes(data))
    with SQLiteStore.open(filled) as s, pytest.raises(InvalidInput) as err:
        s.list_conversations()
    assert str(filled) in str(err.value) and "damaged" in str(err.value)
    assert filled.read_bytes() == bytes(data)


def test_a_checked_file_is_checked_again_only_when_something_else_wrote_to_it(filled: Path):
    with SQLiteStore.open(filled) as s:
        assert s.checked  # left as the last writer left it: no second full read
        conversation = s.list_conversations()[0]
        s.add_message(conversation.id, "user", "one more")
    with SQLiteStore.open(filled) as s:
        assert s.checked
    conn = sqlite3.connect(filled)  # another program writes to it
    conn.execute("UPDATE conversations SET title = 'renamed'")
    conn.commit()
    conn.close()
    with SQLiteStore.open(filled) as s:
        assert not s.checked
        assert s.list_conversations()[0].title == "renamed"  # reading needs no check
        s.add_message(conversation.id, "user", "checked first")
        assert s.checked
    assert stat.S_IMODE(filled.with_name("history.db-checked").stat().st_mode) == 0o600


def test_a_file_damaged_after_it_was_checked_is_refused_before_a_write(filled: Path):
    data = bytearray(filled.read_bytes())
    data[len(data) - 4096 :] = b"\xff" * 4096  # the last page: a message page, not the schema
    filled.write_bytes(bytes(data))
    with SQLiteStore.open(filled) as s, pytest.raises(InvalidInput) as err:
        s.create_conversation("m")
    assert "damaged" in str(err.value) and f"mv {filled} {filled}.damaged" in str(err.value)
    assert filled.read_bytes() == bytes(data)


def test_a_newer_schema_is_refused_untouched(db: Path):
    with SQLiteStore.open(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    error = assert_refused_untouched(db, f"schema version {SCHEMA_VERSION + 1}")
    assert "Upgrade localgpt" in str(error)


def test_another_programs_database_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "history.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE bookmarks (url TEXT)")
    conn.commit()
    conn.close()
    assert_refused_untouched(path, "another program")


def test_an_empty_file_and_an_empty_v0_database_are_migrated(tmp_path: Path):
    empty = tmp_path / "empty.db"
    empty.touch()
    v0 = tmp_path / "v0.db"
    conn = sqlite3.connect(v0)
    conn.execute("CREATE TABLE scratch (x)")
    conn.execute("DROP TABLE scratch")
    conn.commit()
    conn.close()
    assert v0.stat().st_size > 0
    for path in [empty, v0]:
        with SQLiteStore.open(path) as s:
            s.add_message(s.create_conversation("m").id, "user", "works")
            assert [h.snippet for h in s.search("works")] == ["**works**"]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()


def test_a_path_that_cannot_hold_a_database_is_invalid_input(tmp_path: Path):
    folder = tmp_path / "history.db"
    folder.mkdir()
    with pytest.raises(InvalidInput) as err:
        SQLiteStore.open(folder)
    assert str(folder) in str(err.value)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InvalidInput) as err:
        SQLiteStore.open(blocker / "history.db")
    assert str(blocker) in str(err.value)


def test_a_held_write_lock_becomes_lock_busy(db: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 100)
    with SQLiteStore.open(db) as s:
        conv = s.create_conversation("m")
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(LockBusy):
                s.add_message(conv.id, "user", "blocked")
            assert s.list_conversations()[0].id == conv.id  # readers are not blocked
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert s.add_message(conv.id, "user", "free again").seq == 0


# -- concurrent writers ---------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from localgpt_cli.history.postgres import PostgresStore
    from localgpt_cli.history.sqlite import SQLiteStore

    where, conversation_id, name, go, turns = sys.argv[1:6]
    is_pg = where.startswith("postgresql://")
    opened = PostgresStore.open(where) if is_pg else SQLiteStore.open(where)
    with opened as store:
        while not Path(go).exists():
            time.sleep(0.001)
        for i in range(int(turns)):
            store.add_message(conversation_id, "user", f"{name} asks {i}")
            store.add_message(conversation_id, "assistant", f"{name} answer {i}")
    """
)
WRITERS, TURNS = 4, 50


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_four_processes_appending_turns_at_once_lose_nothing(
    backend: str, db: Path, tmp_path: Path, request: pytest.FixtureRequest
):
    """The figure of issue 17: 4 processes x 50 turns into one conversation at once; every
    message is stored once, seqs are 0..399 without a gap, each writer's in its order."""
    where = str(db) if backend == "sqlite" else request.getfixturevalue("pg_url")
    if backend == "sqlite":
        opened = SQLiteStore.open(db)
    else:
        from localgpt_cli.history.postgres import PostgresStore

        opened = PostgresStore.open(where)
    with opened as s:
        conv = s.create_conversation("m")
    go = tmp_path / "go"
    names = [f"writer{n}" for n in range(WRITERS)]
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, where, conv.id, name, str(go), str(TURNS)],
                         cwd=REPO, stderr=subprocess.PIPE, text=True)
        for name in names
    ]  # fmt: skip
    go.touch()
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with (SQLiteStore.open(db) if backend == "sqlite" else PostgresStore.open(where)) as s:
        stored = s.messages(conv.id)
        assert s.get(conv.id).messages == WRITERS * TURNS * 2
    assert [m.seq for m in stored] == list(range(WRITERS * TURNS * 2))
    assert len({m.id for m in stored}) == len(stored)
    for name in names:
        mine = [m.content for m in stored if m.content.startswith(name + " ")]
        assert mine == [f"{name} {w} {i}" for i in range(TURNS) for w in ("asks", "answer")]
