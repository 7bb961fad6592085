"""`localgpt chat` against the stand-in: output modes, thinking, stdin, options, errors."""

from __future__ import annotations

import pytest

from tests.cli import invoke, run, validate_packets
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


def test_timeout_on_a_slow_stream_exits_3(standin):
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
