"""Project memory (`localgpt memory`), `history mark`, the REPL's /remember and the
`[memory]` settings, as a user sees them: stdout, exit codes, what is stored, what the
model is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import ROOT, invoke
from tests.standin import Reply


def home() -> Path:
    return Path(os.environ["LOCALGPT_HOME"])


def test_add_list_rm_as_records_and_text(isolated_env):
    r = invoke("memory", "add", "--json", "we deploy with Ansible, never by hand")
    assert r.exit_code == 0, r.stderr
    (added,) = r.records()
    assert added["type"] == "memory" and added["status"] == "added"
    assert added["text"] == "we deploy with Ansible, never by hand"
    assert added["collection"] is None
    again = invoke("memory", "add", "--json", "we  deploy with Ansible,", "never by hand")
    assert again.records()[0]["status"] == "exists"  # stored once
    assert again.records()[0]["id"] == added["id"]
    invoke("memory", "add", "-C", "papers", "cite by first author and year")
    listed = invoke("memory", "list", "--json").records()
    assert [(f["text"], f["collection"]) for f in listed] == [
        ("we deploy with Ansible, never by hand", None),
        ("cite by first author and year", "papers")]
    only = invoke("memory", "list", "-C", "other", "--json").records()
    assert [f["collection"] for f in only] == [None]
    text = invoke("memory")
    assert text.stdout.splitlines()[0].split("\t") == ["ID", "SCOPE", "ADDED", "TEXT"]
    assert "papers\t" in text.stdout
    gone = invoke("memory", "rm", added["id"][:20])
    assert gone.exit_code == 0
    assert gone.stdout.startswith(f"removed {added['id']}  (global)  we deploy")
    assert [f["text"] for f in invoke("memory", "list", "--json").records()] == [
        "cite by first author and year"]
    stored = (home() / "memory.jsonl").read_text().splitlines()
    assert len(stored) == 1 and json.loads(stored[0])["collection"] == "papers"
    assert (home() / "memory.jsonl").stat().st_mode & 0o777 == 0o600


def test_bad_input_is_one_line_with_the_right_code(isolated_env):
    r = invoke("memory", "add", "   ")
    assert r.exit_code == 2 and r.stderr.count("\n") <= 2 and "empty" in r.stderr
    r = invoke("memory", "add", "x" * 1001)
    assert r.exit_code == 2 and "at most 1,000" in r.stderr
    r = invoke("memory", "rm", "01ZZZZ")
    assert r.exit_code == 6 and "memory list" in r.stderr
    assert "Traceback" not in r.stderr
    empty = invoke("memory", "list")
    assert empty.exit_code == 0 and empty.stdout == "" and "No project memory yet" in empty.stderr
    assert not (home() / "memory.jsonl").exists()  # reading creates nothing
    (home() / "memory.jsonl").write_text('{"id": "x"}\n')
    r = invoke("memory", "list")
    assert r.exit_code == 6 and "line 1" in r.stderr


def test_a_fact_that_is_not_utf8_is_one_line_exit_6(isolated_env):
    # Issue 24.12: the argument's bytes \xff\xfe reached json.dumps as surrogates and
    # ended as "internal error: UnicodeEncodeError", exit 1.
    kept = invoke("memory", "add", "--json", "keep me").records()[0]
    before = (home() / "memory.jsonl").read_bytes()
    for extra in ((), ("--json",)):
        p = subprocess.run([sys.executable, "-m", "localgpt_cli", "memory", "add", *extra,
                            b"\xff\xfe bad"], capture_output=True, cwd=ROOT, timeout=60)
        assert p.returncode == 6, p.stderr
        assert p.stderr.decode().splitlines() == [
            "localgpt: error: The fact is not UTF-8 text: byte 0xff at character 1; nothing "
            "was stored. Give the fact as UTF-8 (check the terminal's locale, e.g. LANG=C.UTF-8)."
        ]
        if extra:
            assert json.loads(p.stdout)["code"] == "invalid_input"
        else:
            assert p.stdout == b""
    assert (home() / "memory.jsonl").read_bytes() == before
    assert [f["id"] for f in invoke("memory", "list", "--json").records()] == [kept["id"]]


def test_rm_with_an_unknown_id_removes_none(isolated_env):
    kept = invoke("memory", "add", "--json", "keep me").records()[0]
    r = invoke("memory", "rm", kept["id"], "01ZZZZ")  # the first id alone would match
    assert (r.exit_code, r.stdout) == (6, "") and "01ZZZZ" in r.stderr
    assert [f["id"] for f in invoke("memory", "list", "--json").records()] == [kept["id"]]
    assert invoke("memory", "rm", kept["id"]).exit_code == 0


def test_facts_go_right_after_the_system_prompt_for_their_collection(standin, isolated_env):
    invoke("memory", "add", "we deploy with Ansible, never by hand")
    invoke("memory", "add", "-C", "papers", "cite by first author and year")
    invoke("chat", "-s", "Be terse.", "how do we deploy?")
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "system", "user"]
    assert sent[0]["content"] == "Be terse."
    assert sent[1]["content"].startswith("Project memory:")
    assert "- we deploy with Ansible, never by hand" in sent[1]["content"]
    assert "cite by first author" not in sent[1]["content"]
    invoke("chat", "-C", "papers", "--no-rag", "how do I cite?")
    facts = standin.chat_requests()[-1]["messages"][0]["content"]
    assert "- we deploy with Ansible" in facts and "- cite by first author and year" in facts


def test_two_writers_lose_nothing(isolated_env):
    script = ("import sys\nfrom pathlib import Path\n"
              "from localgpt_cli.project_memory import ProjectMemory\n"
              "m = ProjectMemory(Path(sys.argv[1]))\n"
              "for i in range(40): m.add(f'fact {sys.argv[2]}-{i}')\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(home()), tag], cwd=ROOT)
             for tag in ("a", "b", "c")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    texts = [f["text"] for f in invoke("memory", "list", "--json").records()]
    assert sorted(texts) == sorted(f"fact {t}-{i}" for t in "abc" for i in range(40))


def _conversation(turns: int) -> tuple[str, list[str]]:
    with SQLiteStore.open(home() / "history.db") as store:
        cid = store.create_conversation("llama3.2").id
        ids = []
        for i in range(turns):
            ids.append(store.add_message(cid, "user", f"note {i}: buy {i} apples").id)
            store.add_message(cid, "assistant", f"ok {i}")
    return cid, ids


def test_history_mark_makes_a_turn_survive_fading(standin, isolated_env):
    _, ids = _conversation(60)
    ask = ("chat", "-c", "--json", "tell me something")
    invoke(*ask)
    sent = [m["content"] for m in standin.chat_requests()[-1]["messages"]]
    assert "note 2: buy 2 apples" not in sent  # unrelated and old: faded
    r = invoke("history", "mark", ids[2][:26], "--important", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.records()[0]["metadata"] == {"important": True}
    invoke(*ask)
    sent = [m["content"] for m in standin.chat_requests()[-1]["messages"]]
    assert "note 2: buy 2 apples" in sent
    r = invoke("history", "mark", ids[2], "--not-important")
    assert r.stdout.startswith(f"marked {ids[2]} not important  (user: note 2:")
    with SQLiteStore.open(home() / "history.db") as store:
        assert store.messages(store.latest().id)[4].metadata == {}


def test_history_mark_latest_and_errors(standin, isolated_env):
    r = invoke("history", "mark", "latest", "--important")
    assert r.exit_code == 6 and "no conversations yet" in r.stderr
    invoke("chat", "hello")
    r = invoke("history", "mark", "latest", "--important", "--json")
    assert r.records()[0]["role"] == "assistant"
    assert r.records()[0]["metadata"]["important"] is True
    r = invoke("history", "mark", "latest")
    assert r.exit_code == 2 and "--important or --not-important" in r.stderr
    r = invoke("history", "mark", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "--important")
    assert r.exit_code == 6 and "Traceback" not in r.stderr


def test_history_mark_takes_a_unique_prefix_of_a_message_id(standin, isolated_env):
    cid, ids = _conversation(3)
    with SQLiteStore.open(home() / "history.db") as store:
        every = [m.id for m in store.messages(cid)]
    n = next(k for k in range(1, 27)
             if not any(i.startswith(ids[1][:k]) for i in every if i != ids[1]))  # fmt: skip
    r = invoke("history", "mark", ids[1][:n].lower(), "--important")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"marked {ids[1]} important  (user: note 1: buy 1 apples)\n"
    common = os.path.commonprefix(every)
    r = invoke("history", "mark", common, "--important")
    assert r.exit_code == 6 and r.stdout == ""
    assert r.stderr.count("\n") <= 2 and "Traceback" not in r.stderr  # the error, its hint
    newest = f"{every[-1]} (assistant: ok 2);"
    assert f"message id {common!r} is ambiguous: it starts {newest}" in r.stderr
    r = invoke("history", "mark", common, "--important", "--json")
    error = r.records()[0]
    assert error["code"] == "ambiguous_id" and r.exit_code == 6
    r = invoke("history", "mark", "0000000000", "--important")
    assert r.exit_code == 6 and "no message has an id starting with '0000000000'" in r.stderr
    with SQLiteStore.open(home() / "history.db") as store:
        marked = [m.id for m in store.messages(cid) if m.metadata.get("important")]
    assert marked == [ids[1]]


def test_memory_settings_come_from_the_config_file_and_are_checked(standin, isolated_env):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[memory]\nrecent_turns = 1\nhalf_life_turns = 5\n")
    rows = {r["key"]: r for r in invoke("config", "--json").records() if r["type"] == "setting"}
    assert rows["memory.recent_turns"]["value"] == 1
    assert rows["memory.half_life_turns"]["source"] == f"file {config}"
    _conversation(3)
    r = invoke("chat", "-c", "--json", "hi")
    report = next(p["payload"] for p in r.records() if p["type"] == "memory")
    assert report["recent"] == [3]
    config.write_text("[memory]\nrecent_turns = -1\n")
    r = invoke("chat", "hi")
    assert r.exit_code == 6 and "memory.recent_turns" in r.stderr and ">= 0" in r.stderr
    config.write_text("[memory]\nhalf_life = 3\n")
    r = invoke("config")
    assert r.exit_code == 6 and "memory.half_life" in r.stderr


def test_remember_in_the_repl_marks_the_last_answer(standin, isolated_env):
    from tests.test_repl import Terminal

    standin.script(Reply(content="Noted."))
    term = Terminal("chat")
    term.read_until(b">>>")
    term.type(b"/remember\r")
    term.read_until(b"No turn to remember yet")
    term.type(b"my locker code is 4711\r")
    term.read_until(b"Noted.")
    term.type(b"/remember\r")
    term.read_until(b"Remembered")
    term.type(b"/exit\r")
    assert term.wait() == 0
    with SQLiteStore.open(home() / "history.db") as store:
        messages = store.messages(store.latest().id)
    assert [m.metadata.get("important") for m in messages] == [None, True]


def test_remember_in_a_continued_repl_marks_the_answer_it_continues(standin, isolated_env):
    """`chat -c` then /remember before any question marks the conversation's last answer
    (it used to say there was no turn yet)."""
    from tests.test_repl import Terminal

    standin.script(Reply(content="Noted."))
    assert invoke("chat", "my locker code is 4711").exit_code == 0
    term = Terminal("chat", "-c")
    term.read_until(b">>>")
    term.type(b"/remember\r")
    term.read_until(b"Remembered")
    term.type(b"/exit\r")
    assert term.wait() == 0
    with SQLiteStore.open(home() / "history.db") as store:
        messages = store.messages(store.latest().id)
    assert [m.metadata.get("important") for m in messages] == [None, True]


def test_remember_under_no_save_marks_the_turn_kept_in_memory(standin, isolated_env):
    """--no-save keeps the REPL's turns in memory, so /remember works and nothing is
    written; before a question it says to ask first (not that nothing is stored)."""
    from tests.test_repl import Terminal

    standin.script(Reply(content="Noted."))
    term = Terminal("chat", "--no-save")
    term.read_until(b">>>")
    term.type(b"/remember\r")
    term.read_until(b"No turn to remember yet: ask something first.")
    term.type(b"my locker code is 4711\r")
    term.read_until(b"Noted.")
    term.type(b"/remember\r")
    term.read_until(b"Remembered")
    term.type(b"/exit\r")
    assert term.wait() == 0
    assert not (home() / "history.db").exists()
