"""`localgpt chat` against the stand-in: output modes, thinking, stdin, options, errors."""

from __future__ import annotations

import codecs
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.kernel.context import message_tokens, prompt_budget
from tests.cli import ROOT, invoke, run, validate_packets
from tests.standin import Reply


def test_plain_answer_is_exactly_the_text(standin):
    standin.script(Reply(content="The sky is blue."))
    r = invoke("chat", "why", "is", "the", "sky", "blue?")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "The sky is blue.\n"
    assert "\x1b[" not in r.stdout + r.stderr
    body = standin.chat_requests()[-1]
    assert body["model"] == "llama3.2"  # the default model, sent as configured
    assert body["messages"][-1] == {"role": "user", "content": "why is the sky blue?"}


def test_json_packets_validate_and_tokens_make_the_answer(standin):
    standin.script(Reply(content=["Hel", "lo", " there"], prompt_eval_count=12))
    r = invoke("chat", "--json", "hi")
    assert r.exit_code == 0
    packets = r.records()
    validate_packets(packets)
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == "Hello there"
    done = packets[-1]["payload"]
    assert done["reason"] == "stop"
    assert done["usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
    assert done["model"] == "llama3.2"
    assert done["timings"]["total_ms"] >= 0


def test_global_json_flag_works_too(standin):
    r = invoke("--json", "chat", "hi")
    assert r.exit_code == 0
    validate_packets(r.records())


def test_thinking_model_thinks_by_default_and_thoughts_go_to_stderr(standin):
    standin.script(Reply(thinking="Let me think.", content="42"), model="qwen3")
    r = invoke("chat", "-m", "qwen3", "answer?")
    assert r.exit_code == 0
    assert r.stdout == "42\n"
    assert "Let me think." in r.stderr
    assert standin.chat_requests()[-1]["think"] is True


def test_hide_thinking_keeps_stderr_clean(standin):
    standin.script(Reply(thinking="secret reasoning", content="42"), model="qwen3")
    r = invoke("chat", "-m", "qwen3", "--hide-thinking", "answer?")
    assert r.stdout == "42\n"
    assert "secret" not in r.stderr


def test_no_think_is_sent(standin):
    invoke("chat", "-m", "qwen3", "--no-think", "x")
    assert standin.chat_requests()[-1]["think"] is False


def test_think_on_a_model_that_cannot_warns_and_answers(standin):
    standin.script(Reply(content="fine"), model="gemma2")
    r = invoke("chat", "-m", "gemma2", "--think", "x")
    assert r.exit_code == 0
    assert r.stdout == "fine\n"
    assert "cannot think" in r.stderr
    assert "think" not in standin.chat_requests()[-1]


def test_think_tags_in_content_become_thoughts(standin):
    standin.script(Reply(content=["<thi", "nk>\nhmm, ", "ok</th", "ink>\n\nYes."]))
    r = invoke("chat", "--json", "q")
    packets = r.records()
    validate_packets(packets)
    tokens = "".join(p["payload"] for p in packets if p["type"] == "token")
    thoughts = "".join(p["payload"] for p in packets if p["type"] == "thought")
    assert tokens == "Yes."
    assert thoughts == "hmm, ok"


def test_stdin_is_attached_ahead_of_the_prompt(standin):
    r = invoke("chat", "write a commit message", input="diff --git a/x b/x\n+hello\n")
    assert r.exit_code == 0
    content = standin.chat_requests()[-1]["messages"][-1]["content"]
    assert content == "diff --git a/x b/x\n+hello\n\nwrite a commit message"


def test_stdin_alone_is_the_prompt(standin):
    invoke("chat", input="hi\n")
    assert standin.chat_requests()[-1]["messages"][-1]["content"] == "hi\n"


def test_nothing_to_ask_is_a_usage_error(standin):
    r = invoke("chat", input="")
    assert r.exit_code == 2
    assert "Nothing to ask" in r.stderr


def test_system_prompt_and_typed_options_are_sent(standin):
    invoke("chat", "-s", "Be brief.", "-o", "temperature", "0.1", "-o", "num_ctx", "4096",
           "-o", "stop", "###", "q")
    body = standin.chat_requests()[-1]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["options"] == {"temperature": 0.1, "num_ctx": 4096, "stop": ["###"]}


def test_invalid_option_value_exits_2_before_calling_ollama(standin):
    r = invoke("chat", "-o", "temperature", "hot", "q")
    assert r.exit_code == 2
    assert "temperature" in r.stderr and "number" in r.stderr
    assert standin.chat_requests() == []


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [("temperature", "nan", "0 or more"), ("num_ctx", "-5", "1 to 2147483647"),
     ("top_p", "7", "0 to 1")],
)  # fmt: skip
def test_out_of_range_option_exits_2_before_calling_ollama(standin, key, value, allowed):
    r = invoke("chat", "-o", key, value, "q")
    assert r.exit_code == 2
    assert r.stderr == (
        f"localgpt: error: Model option {key!r} must be {allowed}, got {value!r}.\n"
    )
    assert standin.chat_requests() == []


def test_no_stream_sends_stream_false_and_still_writes_packets(standin):
    standin.script(Reply(content="whole answer"))
    r = invoke("chat", "--json", "--no-stream", "q")
    assert standin.chat_requests()[-1]["stream"] is False
    packets = r.records()
    validate_packets(packets)
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == "whole answer"


def test_unknown_model_exits_4_and_lists_installed(standin):
    r = invoke("chat", "-m", "llama9", "hi")
    assert r.exit_code == 4
    assert "llama9" in r.stderr and "llama3.2:latest" in r.stderr
    assert "models pull llama9" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_model_in_json_mode_gives_error_and_done(standin):
    r = invoke("chat", "--json", "-m", "llama9", "hi")
    assert r.exit_code == 4
    packets = r.records()
    validate_packets(packets)
    assert [p["type"] for p in packets] == ["error", "done"]
    assert packets[0]["payload"]["code"] == "model_not_found"
    assert packets[1]["payload"]["reason"] == "error"


def test_unreachable_ollama_exits_3_naming_the_host(isolated_env, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")
    r = invoke("chat", "hi")
    assert r.exit_code == 3
    assert "Ollama is not reachable at http://127.0.0.1:9" in r.stderr
    assert "ollama serve" in r.stderr
    assert r.stderr.count("\n") == 1
    assert r.stdout == ""


def test_error_mid_stream_keeps_the_partial_answer(standin):
    standin.script(Reply(content=["partial ", "answer ", "lost"], error_after=2))
    r = invoke("chat", "--json", "q")
    assert r.exit_code == 1
    packets = r.records()
    validate_packets(packets)
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == "partial answer "
    err = next(p for p in packets if p["type"] == "error")["payload"]
    assert err["code"] == "model_error"
    assert packets[-1]["payload"]["reason"] == "error"


def test_error_mid_stream_plain_mode(standin):
    standin.script(Reply(content=["partial ", "answer"], error_after=1))
    r = invoke("chat", "q")
    assert r.exit_code == 1
    assert r.stdout == "partial \n"
    assert "error" in r.stderr and "Traceback" not in r.stderr


def test_dropped_connection_exits_3(standin):
    standin.script(Reply(content=["a ", "b ", "c"], drop_after=1))
    r = invoke("chat", "--json", "q")
    assert r.exit_code == 3
    packets = r.records()
    validate_packets(packets)
    assert next(p for p in packets if p["type"] == "error")["payload"]["code"] == "connection_lost"


def test_timeout_on_a_slow_stream_exits_3(standin, isolated_env):
    """--timeout is the time to the first token; between tokens, `idle_timeout`."""
    config = isolated_env / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("idle_timeout = 0.3\n")
    standin.script(Reply(content=["a ", "b ", "c"], delay=2.0))
    r = invoke("chat", "--json", "--timeout", "0.3", "q")
    assert r.exit_code == 3
    err = next(p for p in r.records() if p["type"] == "error")["payload"]
    assert err["code"] == "ollama_timeout"
    assert err["retryable"] is True


def test_server_busy_maps_to_exit_3(standin):
    standin.script(Reply(http_status=503, http_error="server busy, please try again."))
    r = invoke("chat", "q")
    assert r.exit_code == 3
    assert "busy" in r.stderr


@pytest.mark.parametrize("flag", ["--debug", "-v"])
def test_debug_shows_a_traceback_for_errors(isolated_env, monkeypatch, flag):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")
    r = run(flag, "models", "--refresh")
    assert r.exit_code == 3
    assert "Traceback" in r.stderr
    r = run("models", "--refresh")
    assert "Traceback" not in r.stderr


# -- piped bytes that are not UTF-8 (issue 13, case 17) ---------------------------------------


def _chat_with_stdin(piped: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`localgpt chat ARGS` as a real process with these exact bytes on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "localgpt_cli", "chat", *args], input=piped,
        capture_output=True, env=os.environ.copy(), cwd=ROOT, timeout=60,
    )


@pytest.mark.parametrize(("piped", "warning"), [
    (b"caf\xe9 log line\n", "not valid UTF-8; decoded as cp1252"),
    ("café log line\n".encode("utf-16"), "decoded as utf-16 (byte-order mark)"),
    (codecs.BOM_UTF8 + "café log line\r\n".encode(), None),
], ids=["latin-1", "utf-16", "utf-8-bom-crlf"])
def test_piped_text_in_another_encoding_is_decoded_like_an_ingested_file(
    standin, isolated_env, piped, warning
):
    standin.script(Reply(content="A log line."))
    p = _chat_with_stdin(piped, "what is this")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"A log line.\n"
    sent = standin.chat_requests()[-1]["messages"][-1]["content"]
    assert sent == "café log line\n\nwhat is this"
    err = p.stderr.decode()
    assert (f"localgpt: warning: stdin: {warning}\n" == err) if warning else err == ""
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        conversation = store.latest()
        assert conversation is not None
        assert store.messages(conversation.id)[0].content == sent


@pytest.mark.parametrize("piped", [
    Path(sys.executable).resolve().read_bytes()[:200_000],
    b"almost text\x00but a NUL byte\n",
], ids=["executable", "nul"])
def test_binary_stdin_is_refused_in_one_line_and_nothing_is_sent_or_stored(
    standin, isolated_env, piped
):
    p = _chat_with_stdin(piped, "what is this")
    assert p.returncode == 6
    err = p.stderr.decode()
    assert err.startswith("localgpt: error: stdin is binary"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert p.stdout == b""
    assert standin.chat_requests() == []
    assert not (isolated_env / "localgpt" / "history.db").exists()


# -- piped text larger than the context (issue 13, case 18) ----------------------------------


def test_piped_text_too_large_for_the_context_is_cut_in_the_middle_keeping_the_question(
    standin, isolated_env
):
    standin.add_model("small", context_length=8192)
    lines = [f"{i:07d} worker {i % 7} retried the upload and went on\n" for i in range(42_000)]
    piped = "".join(lines)[:2_000_000]
    assert len(piped) == 2_000_000
    question = "what went wrong first?"
    r = invoke("chat", "--json", "-m", "small", question, input=piped)
    assert r.exit_code == 0, r.stderr
    body = standin.chat_requests()[-1]
    sent = body["messages"][-1]["content"]
    # What the estimate says fits: the whole prompt within the budget of this context.
    assert sum(message_tokens(m) for m in body["messages"]) <= prompt_budget(8192, {})
    assert body["options"]["num_ctx"] == 8192
    assert sent.startswith(piped[:2000])
    assert sent.endswith(piped.rstrip()[-500:] + "\n\n" + question)
    marker = re.search(r"\n\n\[… ([\d,]+) characters cut to fit the context …\]\n\n", sent)
    assert marker is not None
    cut = int(marker.group(1).replace(",", ""))
    assert len(sent) - len(marker.group(0)) - len("\n\n" + question) == len(piped.rstrip()) - cut
    packets = r.records()
    validate_packets(packets)
    assert packets[-1]["payload"]["cut"] == [
        {"source": "stdin", "chars": 2_000_000, "cut_chars": cut}]
    warnings = {w["code"]: w["message"] for w in map(json.loads, r.stderr.splitlines())}
    assert f"{cut:,} characters cut from the middle" in warnings["stdin_truncated"]
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        conversation = store.latest()
        assert conversation is not None
        user, answer = store.messages(conversation.id)
    assert user.content == sent  # what the model saw, marker included
    assert answer.metadata["cut"] == packets[-1]["payload"]["cut"]


def test_piped_text_that_fits_is_sent_whole_with_no_cut_field(standin):
    r = invoke("chat", "--json", "summarise", input="short log\n")
    assert standin.chat_requests()[-1]["messages"][-1]["content"] == "short log\n\nsummarise"
    assert "cut" not in r.records()[-1]["payload"]


def test_a_question_that_cannot_fit_is_refused_before_anything_is_sent(standin, isolated_env):
    question = "why " * 2000
    r = invoke("chat", "-o", "num_ctx", "1024", question, input="a log\n")
    assert r.exit_code == 6
    assert r.stderr.startswith("localgpt: error: the message does not fit the 1,024-token context")
    assert r.stderr.count("\n") == 1
    assert standin.chat_requests() == []
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        assert store.list_conversations() == []


def test_an_endless_binary_stdin_is_refused_without_reading_it_all(standin):
    with open("/dev/zero", "rb") as zeros:
        p = subprocess.run([sys.executable, "-m", "localgpt_cli", "chat", "q"], stdin=zeros,
                           capture_output=True, env=os.environ.copy(), cwd=ROOT, timeout=60)
    assert p.returncode == 6
    assert p.stderr.startswith(b"localgpt: error: stdin is binary")
    assert standin.chat_requests() == []
