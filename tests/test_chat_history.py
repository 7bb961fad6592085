"""Chat with memory: stored turns, -c/--cid continuation, --no-save, partial answers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import ROOT, invoke, run, validate_packets
from tests.standin import Reply


def db(isolated_env: Path) -> Path:
    return Path(os.environ["LOCALGPT_HOME"]) / "history.db"


def test_a_turn_is_stored_and_named_in_done(standin, isolated_env):
    standin.script(Reply(thinking="hmm", content="Paris."), model="qwen3")
    r = invoke("chat", "--json", "-m", "qwen3", "capital of France?\nplease")
    done = r.records()[-1]["payload"]
    with SQLiteStore.open(db(isolated_env)) as store:
        conv = store.resolve(done["conversation_id"])
        msgs = store.messages(conv.id)
    assert conv.title == "capital of France?"
    assert conv.model == "qwen3"
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "capital of France?\nplease"), ("assistant", "Paris.")]
    assert msgs[1].id == done["message_id"]
    assert msgs[1].thinking == "hmm"
    assert msgs[1].metadata["done_reason"] == "stop"
    assert msgs[1].metadata["usage"]["prompt_tokens"] == 26


def test_continue_in_a_second_process_sends_the_first_exchange(standin):
    standin.script(Reply(content="Four."), Reply(content="Eight."))
    first = run("chat", "what is 2+2?")
    assert first.exit_code == 0, first.stderr
    second = run("chat", "-c", "and doubled?")
    assert second.stdout == "Eight.\n"
    sent = standin.chat_requests()[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "what is 2+2?"), ("assistant", "Four."), ("user", "and doubled?")]


def test_continue_keeps_the_conversation_model_unless_m_is_given(standin):
    invoke("chat", "-m", "qwen3", "one")
    invoke("chat", "-c", "two")
    assert standin.chat_requests()[-1]["model"] == "qwen3"
    invoke("chat", "-c", "-m", "llama3.2", "three")
    assert standin.chat_requests()[-1]["model"] == "llama3.2"


def test_cid_prefix_unknown_and_ambiguous(standin, isolated_env):
    done = invoke("chat", "--json", "first").records()[-1]["payload"]
    cid = done["conversation_id"]
    r = invoke("chat", "--cid", cid[:12], "again")
    assert r.exit_code == 0
    assert len(standin.chat_requests()[-1]["messages"]) == 3
    r = invoke("chat", "--cid", "ZZZZZZ", "x")
    assert r.exit_code == 6 and "ZZZZZZ" in r.stderr
    invoke("chat", "second conversation")
    r = invoke("chat", "--cid", "0", "x")  # every ULID of this century starts with 0
    assert r.exit_code == 6
    assert cid in r.stderr


def test_no_save_touches_no_database(standin, isolated_env):
    r = invoke("chat", "--no-save", "hi")
    assert r.exit_code == 0
    assert not db(isolated_env).exists()
    r = invoke("chat", "--no-save", "-c", "hi")
    assert r.exit_code == 6 and "no conversation to continue" in r.stderr


def test_window_limits_what_is_sent(standin):
    for i in range(4):
        invoke("chat", *(["-c"] if i else []), f"q{i}")
    invoke("chat", "-c", "--window", "2", "last")
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert (sent[0]["content"], sent[2]["content"]) == ("q3", "last")
    invoke("chat", "-c", "--window", "0", "alone")
    assert [m["content"] for m in standin.chat_requests()[-1]["messages"]] == ["alone"]


def test_error_mid_stream_stores_the_partial_answer_marked(standin, isolated_env):
    standin.script(Reply(content=["half ", "an ", "answer"], error_after=2))
    r = invoke("chat", "--json", "q")
    done = r.records()[-1]["payload"]
    with SQLiteStore.open(db(isolated_env)) as store:
        msg = store.get_message(done["message_id"])
    assert msg.content == "half an "
    assert msg.metadata["done_reason"] == "error"
    assert msg.metadata["error"]["code"] == "model_error"


def test_ctrl_c_answer_is_stored_marked_aborted(standin, isolated_env):
    standin.script(Reply(content=["kept "] + ["more "] * 200, delay=0.05))
    proc = subprocess.Popen([sys.executable, "-m", "localgpt_cli", "chat", "--json", "q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=os.environ.copy(), cwd=ROOT)
    first = proc.stdout.readline()
    assert b"token" in first
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=20)
    packets = [json.loads(x) for x in [first, *rest.splitlines()]]
    validate_packets(packets)
    done = packets[-1]["payload"]
    assert done["reason"] == "aborted"
    streamed = "".join(p["payload"] for p in packets if p["type"] == "token")
    with SQLiteStore.open(db(isolated_env)) as store:
        msg = store.get_message(done["message_id"])
    assert msg.metadata["done_reason"] == "aborted"
    assert msg.content == streamed and streamed.startswith("kept ")


def test_unknown_model_stores_nothing(standin, isolated_env):
    invoke("chat", "-m", "nope", "hi")
    if db(isolated_env).exists():
        with SQLiteStore.open(db(isolated_env)) as store:
            assert store.list_conversations() == []


def test_two_processes_continuing_one_conversation_lose_nothing(standin, isolated_env):
    done = invoke("chat", "--json", "start").records()[-1]["payload"]
    cid = done["conversation_id"]
    standin.script(Reply(content=["a1 ", "a2 ", "a3"], delay=0.2),
                   Reply(content=["b1 ", "b2 ", "b3"], delay=0.2))
    procs = [
        subprocess.Popen([sys.executable, "-m", "localgpt_cli", "chat", "--cid", cid, text],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=os.environ.copy(), cwd=ROOT)
        for text in ("from one", "from two")
    ]
    for proc in procs:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    with SQLiteStore.open(db(isolated_env)) as store:
        messages = store.messages(cid)
    assert [m.seq for m in messages] == list(range(6))
    users = [m.content for m in messages if m.role == "user"]
    answers = [m.content for m in messages if m.role == "assistant"]
    assert sorted(users) == ["from one", "from two", "start"]
    assert len(answers) == 3 and {"a1 a2 a3", "b1 b2 b3"} <= set(answers)


# -- a damaged history.db (issue 13, case 3) -------------------------------------------------


def _damage_from_the_messages_table(path: Path) -> bytes:
    """Garbage over every page from the messages table's root on: the header, the schema
    and the conversations table still read fine, so only a full check finds the damage."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()
    finally:
        conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start:] = bytes((i * 37 + 11) % 256 for i in range(len(data) - start))
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_damaged_history_is_refused_before_the_first_write(standin, isolated_env):
    for question in ("one", "two"):  # processes, so that each closes the file
        assert run("chat", question).exit_code == 0
    path = db(isolated_env)
    damaged = _damage_from_the_messages_table(path)
    r = run("chat", "four")
    assert r.exit_code == 6, r.stderr
    assert path.read_bytes() == damaged
    assert not path.with_name("history.db-wal").exists()
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"localgpt: error: history database {path} is damaged")
    assert f"mv {path} {path}.damaged" in r.stderr
    assert r.stdout == ""
    assert [b["messages"][-1]["content"] for b in standin.chat_requests()] == [
        "one", "two"]
