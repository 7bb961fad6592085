"""Project memory's share of the prompt (issue 25.5): 170-300 facts of 90 characters used
to block every chat ("the question needs ~8 tokens and ~0 are left … Shorten the
question"). Facts get `memory.project_share` of the prompt; those beyond it are left out
(important and most recent kept) with a warning naming `memory rm`; `memory add` warns
when the total passes the share; an error that memory causes says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

from localgpt_cli.kernel.context import SERVER_DEFAULT_CTX, estimate_tokens, prompt_budget
from tests.cli import invoke


def home() -> Path:
    return Path(os.environ["LOCALGPT_HOME"])


def config(text: str) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fact(i: int) -> str:
    return f"fact {i:03d}: the nightly build of service {i} runs on host build-{i} with --fast"


def write_facts(n: int, important: tuple[int, ...] = ()) -> bytes:
    """`n` facts of ~80 characters straight into memory.jsonl (as `memory add` writes
    them), the oldest first; returns the file's bytes."""
    rows = [{"id": f"01JD{i:022d}", "text": fact(i), "collection": None,
             "created_at": f"2026-11-{1 + i // 100:02d}T00:00:00.000Z",
             "important": i in important} for i in range(n)]  # fmt: skip
    home().mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (home() / "memory.jsonl").write_bytes(data)
    return data


def sent_facts(standin) -> list[str]:
    messages = standin.chat_requests()[-1]["messages"]
    block = next(m["content"] for m in messages if m["content"].startswith("Project memory:"))
    return [line[2:] for line in block.splitlines()[1:]]


def test_facts_beyond_their_share_are_left_out_with_a_warning(standin, isolated_env):
    stored = write_facts(300, important=(1,))
    r = invoke("chat", "--no-rag", "-o", "num_ctx", "4096", "how do we deploy?")
    assert r.exit_code == 0, r.stderr
    sent = sent_facts(standin)
    left_out = 300 - len(sent)
    assert 0 < len(sent) < 300
    assert fact(1) in sent and fact(299) in sent  # the important one, the newest
    assert fact(0) not in sent and fact(300 - len(sent)) not in sent  # the oldest go
    assert sent == sorted(sent)  # the facts' own order, oldest first
    room = int(prompt_budget(4096, {}) * 0.25)
    assert estimate_tokens("\n".join(sent)) <= room
    [warning] = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning.startswith(f"localgpt: warning: project memory: {left_out} of 300 facts "
                              "left out; they take ~")
    assert "the 4,096-token context of llama3.2" in warning
    assert "`localgpt memory rm ID`" in warning and "memory.project_share" in warning
    assert (home() / "memory.jsonl").read_bytes() == stored  # nothing removed


def test_a_larger_share_sends_more_and_json_names_the_warning(standin, isolated_env):
    write_facts(300)
    config("[memory]\nproject_share = 0.5\n")
    r = invoke("chat", "--json", "--no-rag", "-o", "num_ctx", "4096", "how do we deploy?")
    assert r.exit_code == 0, r.stderr
    half = len(sent_facts(standin))
    warnings = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    assert [w["code"] for w in warnings] == ["project_memory_budget"]
    config("[memory]\nproject_share = 0.25\n")
    assert invoke("chat", "--no-rag", "-o", "num_ctx", "4096", "hi").exit_code == 0
    assert len(sent_facts(standin)) < half


def test_facts_within_the_share_are_all_sent_without_a_warning(standin, isolated_env):
    write_facts(10)
    r = invoke("chat", "--no-rag", "-o", "num_ctx", "4096", "how do we deploy?")
    assert r.exit_code == 0 and "warning" not in r.stderr
    assert sent_facts(standin) == [fact(i) for i in range(10)]


def test_an_error_that_memory_causes_says_so(standin, isolated_env):
    write_facts(300)
    config("[memory]\nproject_share = 1\n")
    question = "how do we deploy the nightly build of every service, step by step? " * 5
    r = invoke("chat", "--no-rag", "-o", "num_ctx", "4096", question)
    assert r.exit_code == 6, r.stderr
    error = [line for line in r.stderr.splitlines() if line.startswith("localgpt: error:")]
    assert len(error) == 1
    assert "(after the system prompt, project memory (~" in error[0]
    assert "Project memory takes the room the question needs" in error[0]
    assert "`localgpt memory rm ID`" in error[0] and "Shorten the question" not in error[0]
    assert standin.chat_requests() == []  # nothing was sent


def test_project_share_out_of_range_is_a_setting_error(standin, isolated_env):
    for bad in ("0", "1.5", "-0.1"):
        config(f"[memory]\nproject_share = {bad}\n")
        r = invoke("chat", "--no-rag", "hi")
        assert r.exit_code == 6 and "memory.project_share" in r.stderr, r.stderr
        assert "at most 1" in r.stderr


def test_memory_add_warns_when_the_facts_pass_their_share(isolated_env):
    room = int(prompt_budget(SERVER_DEFAULT_CTX, {}) * 0.25)
    write_facts(room // 25)  # ~20 tokens a fact: below the share
    r = invoke("memory", "add", "the staging host is st-2")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    write_facts(100)
    r = invoke("memory", "add", "the staging host is st-3")
    assert r.exit_code == 0 and r.stdout.startswith("added ")
    [warning] = r.stderr.splitlines()
    assert warning.startswith("localgpt: warning: project memory for chats on 'default' now "
                              "takes ~")
    assert "a 4,096-token context (Ollama's default)" in warning
    assert "`localgpt memory rm ID`" in warning
    assert len(invoke("memory", "list", "--json").records()) == 101  # stored all the same


def test_memory_add_sizes_the_warning_by_the_cached_model_context(standin, isolated_env):
    write_facts(100)
    assert invoke("chat", "--no-rag", "hi").exit_code == 0  # caches llama3.2: 131,072 tokens
    r = invoke("memory", "add", "the staging host is st-3")
    assert r.exit_code == 0 and r.stderr == "", r.stderr


def test_important_marks_a_fact_new_or_stored(isolated_env):
    first = invoke("memory", "add", "--json", "we deploy with Ansible").records()[0]
    assert first["important"] is False
    again = invoke("memory", "add", "--json", "--important", "we deploy with Ansible")
    assert again.records()[0] | {"status": "exists"} == first | {
        "important": True, "status": "exists"}
    listed = invoke("memory", "list")
    assert "global, important" in listed.stdout
    assert invoke("memory", "list", "--json").records()[0]["important"] is True
