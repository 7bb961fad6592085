"""`chat -m work:MODEL` through a `[providers.work]` profile against the OpenAI stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import invoke, validate_packets
from tests.openai_standin import Answer, OpenAIStandIn, ToolCall
from tests.standin import Reply

KEY = "sk-test-secret-1234"


@pytest.fixture
def server(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStandIn]:
    """The stand-in, and a config file with profile `work` pointing at it."""
    with OpenAIStandIn(models=("some-model", "other-model"), key=KEY) as s:
        config = isolated_env / "config" / "localgpt" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[providers.work]\nkind = "openai"\nbase_url = "{s.url}"\n'
            'api_key_env = "WORK_API_KEY"\ndefault_model = "some-model"\n'
            'capabilities = ["tools"]\n'
        )
        monkeypatch.setenv("WORK_API_KEY", KEY)
        yield s


def payloads(r, kind: str) -> list:
    return [p["payload"] for p in r.records() if p["type"] == kind]


def test_streams_tokens_and_a_complete_done_with_the_provider(server):
    server.script(Answer(content="Hello from the other side.", usage=(21, 5)))
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    validate_packets(r.records())
    assert "".join(payloads(r, "token")) == "Hello from the other side."
    done = payloads(r, "done")[0]
    assert done["provider"] == "work" and done["model"] == "some-model"
    assert done["reason"] == "stop"
    assert done["usage"] == {"prompt_tokens": 21, "completion_tokens": 5}
    body = server.requests[-1]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][-1] == {"role": "user", "content": "hi"}


def test_plain_text_output_and_the_default_model_of_the_profile(server, monkeypatch):
    monkeypatch.setenv("LOCALGPT_PROVIDER", "work")
    server.script(Answer(content="Plain answer."))
    r = invoke("chat", "hi")
    assert (r.exit_code, r.stdout) == (0, "Plain answer.\n"), r.stderr
    assert server.requests[-1]["body"]["model"] == "some-model"


def test_no_stream_answers_in_one_request(server):
    server.script(Answer(reasoning="Hmm.", content="Whole answer.", usage=(3, 2)))
    r = invoke("chat", "--json", "--no-stream", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    assert payloads(r, "thought") == ["Hmm."] and payloads(r, "token") == ["Whole answer."]
    assert payloads(r, "done")[0]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2}
    assert server.requests[-1]["body"]["stream"] is False


def test_reasoning_content_becomes_thought_packets(server):
    server.script(Answer(reasoning="Let me think about it.", content="42."))
    r = invoke("chat", "--json", "-m", "work:some-model", "answer?")
    assert r.exit_code == 0, r.stderr
    assert "".join(payloads(r, "thought")) == "Let me think about it."
    assert "".join(payloads(r, "token")) == "42."


def test_tool_arguments_split_across_deltas_make_one_tool_round_trip(server):
    server.script(
        Answer(tool_calls=[ToolCall("calculator", '{"expression": "5 + 5"}', pieces=6)]),
        Answer(content="It is 10."),
    )
    r = invoke("chat", "--json", "-m", "work:some-model", "calculate 5 + 5")
    assert r.exit_code == 0, r.stderr
    (start,) = payloads(r, "tool_start")
    (result,) = payloads(r, "tool_result")
    assert start["arguments"] == {"expression": "5 + 5"}
    assert (result["ok"], result["result"]) == (True, "10")
    assert "".join(payloads(r, "token")) == "It is 10."
    second = server.requests[-1]["body"]["messages"]
    call = second[-2]["tool_calls"][0]
    assert call["function"] == {"name": "calculator", "arguments": '{"expression": "5 + 5"}'}
    assert second[-1] == {"role": "tool", "content": "10", "tool_call_id": call["id"]}


def test_malformed_arguments_are_a_tool_error_the_model_sees(server):
    server.script(
        Answer(tool_calls=[ToolCall("calculator", '{"expression": "5 +', pieces=3)]),
        Answer(content="Sorry, let me answer directly: 10."),
    )
    r = invoke("chat", "--json", "-m", "work:some-model", "calculate 5 + 5")
    assert r.exit_code == 0, r.stderr
    (result,) = payloads(r, "tool_result")
    assert result["ok"] is False and "not valid JSON" in result["result"]
    assert payloads(r, "done")[0]["iterations"] == 2
    assert "not valid JSON" in server.requests[-1]["body"]["messages"][-1]["content"]


def test_a_refused_key_exits_77_naming_the_variable_not_the_key(server, monkeypatch):
    monkeypatch.setenv("WORK_API_KEY", "sk-wrong-key-999")
    r = invoke("chat", "-m", "work:some-model", "hi")
    assert r.exit_code == 77
    assert "$WORK_API_KEY" in r.stderr and "HTTP 401" in r.stderr
    assert "sk-wrong-key-999" not in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_an_unset_key_variable_is_said_so(server, monkeypatch):
    monkeypatch.delenv("WORK_API_KEY")
    r = invoke("chat", "-m", "work:some-model", "hi")
    assert r.exit_code == 77
    assert r.stderr.rstrip().endswith("Check the API key in $WORK_API_KEY (it is not set).")


def test_429_with_retry_after_is_retried_then_answers(server):
    server.script(Answer(status=429, retry_after="0"), Answer(content="Finally."))
    r = invoke("chat", "-m", "work:some-model", "hi")
    assert (r.exit_code, r.stdout) == (0, "Finally.\n"), r.stderr
    posts = [q for q in server.requests if q["path"] == "/v1/chat/completions"]
    assert len(posts) == 2


def test_429_every_time_exits_75(server):
    server.script(*[Answer(status=429, retry_after="0")] * 4)
    r = invoke("chat", "-m", "work:some-model", "hi")
    assert r.exit_code == 75 and "HTTP 429" in r.stderr, r.stderr


def test_a_stream_cut_mid_way_keeps_the_partial_answer(server, isolated_env):
    server.script(Answer(content="one two three four five", cut_after=3))
    r = invoke("chat", "--json", "-m", "work:some-model", "count")
    assert r.exit_code == 3, r.stderr
    assert "".join(payloads(r, "token")) == "one two three "
    (error,) = payloads(r, "error")
    assert error["code"] == "connection_lost"
    done = payloads(r, "done")[0]
    assert done["reason"] == "error" and done["provider"] == "work"
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        assert store.get_message(done["message_id"]).content == "one two three "


def test_an_error_event_mid_stream_keeps_the_partial_answer(server, isolated_env):
    server.script(Answer(content="one two three four", error_after=2))
    r = invoke("chat", "--json", "-m", "work:some-model", "count")
    assert r.exit_code == 1, r.stderr
    assert "".join(payloads(r, "token")) == "one two "
    (error,) = payloads(r, "error")
    assert error["code"] == "model_error" and "CUDA out of memory" in error["message"]
    done = payloads(r, "done")[0]
    assert done["reason"] == "error"
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        assert store.get_message(done["message_id"]).content == "one two "


def test_done_missing_but_finish_reason_given_is_a_complete_answer(server):
    server.script(Answer(content="Complete.", no_done=True, finish_reason="length"))
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    assert payloads(r, "done")[0]["reason"] == "length"


def test_content_filter_is_the_done_reason(server):
    server.script(Answer(content="I can", finish_reason="content_filter"))
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    validate_packets(r.records())
    assert payloads(r, "done")[0]["reason"] == "content_filter"


def test_an_unknown_model_exits_4_listing_what_the_server_offers(server):
    r = invoke("chat", "-m", "work:nope", "hi")
    assert r.exit_code == 4
    assert "'nope'" in r.stderr and "Offered: some-model, other-model." in r.stderr
    assert "pull" not in r.stderr


def test_a_tag_that_is_not_a_profile_keeps_its_ollama_meaning(server, standin):
    standin.script(Reply(content="From Ollama."))
    r = invoke("chat", "--json", "-m", "llama3.2:latest", "hi")
    assert r.exit_code == 0, r.stderr
    assert "".join(payloads(r, "token")) == "From Ollama."
    done = payloads(r, "done")[0]
    assert (done["provider"], done["model"]) == ("ollama", "llama3.2:latest")
    assert not [q for q in server.requests if q["path"] == "/v1/chat/completions"]


def test_config_shows_the_profile_and_never_the_key(server):
    r = invoke("config", "--json")
    assert r.exit_code == 0, r.stderr
    (profile,) = [x for x in r.records() if x["type"] == "provider"]
    assert profile["name"] == "work" and profile["api_key_env"] == "WORK_API_KEY"
    assert profile["source"].startswith("file ")
    assert KEY not in r.stdout and KEY not in invoke("config").stdout


def test_retrieval_embeds_the_question_with_ollama_as_the_collection_was(
        server, standin, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "turbine.txt").write_text("The turbine blade coolant flow rate is 42 litres.\n")
    assert invoke("ingest", str(docs)).exit_code == 0
    server.script(Answer(content="42 litres."))
    r = invoke("chat", "--json", "-m", "work:some-model", "turbine coolant flow rate?")
    assert r.exit_code == 0, r.stderr
    (sources,) = payloads(r, "sources")
    assert sources["results"][0]["path"].endswith("turbine.txt")
    assert not [q for q in server.requests if q["path"] == "/v1/embeddings"]
    sent = server.requests[-1]["body"]["messages"]
    assert any("42 litres" in m["content"] for m in sent)


def test_models_ps_stays_on_ollama_when_a_profile_is_the_default(server, standin, monkeypatch):
    monkeypatch.setenv("LOCALGPT_PROVIDER", "work")
    r = invoke("models", "ps", "--json")
    assert r.exit_code == 0, r.stderr
    assert not [q for q in server.requests if q["path"] != "/v1/models"]


def test_think_tags_in_the_content_become_thought_packets(server):
    server.script(Answer(content="<think> weighing it </think>Yes."))
    r = invoke("chat", "--json", "-m", "work:some-model", "ok?")
    assert r.exit_code == 0, r.stderr
    assert "".join(payloads(r, "thought")).strip() == "weighing it"
    assert "".join(payloads(r, "token")) == "Yes."


def test_a_profile_without_base_url_is_refused_in_one_line(isolated_env):
    config = isolated_env / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[providers.work]\nkind = "openai"\n')
    r = invoke("chat", "-m", "work:x", "hi")
    assert r.exit_code == 6
    assert "[providers.work]" in r.stderr and "base_url" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


# -- tools on a profile that does not say (issue 24, item 15) -------------------------------


def _profile(server: OpenAIStandIn, env: Path, capabilities: str | None) -> None:
    config = env / "config" / "localgpt" / "config.toml"
    config.write_text(
        f'[providers.work]\nkind = "openai"\nbase_url = "{server.url}"\n'
        'api_key_env = "WORK_API_KEY"\ndefault_model = "some-model"\n'
        + (f"capabilities = {capabilities}\n" if capabilities is not None else "")
    )


def _offered(server: OpenAIStandIn) -> list[bool]:
    return [bool(r["body"].get("tools")) for r in server.requests
            if r["path"] == "/v1/chat/completions"]  # fmt: skip


def test_a_profile_without_capabilities_offers_tools(server, isolated_env):
    """Before: no `capabilities`, no tools, and no warning that they were left out."""
    _profile(server, isolated_env, None)
    server.script(Answer(tool_calls=[ToolCall("calculator", '{"expression": "2 + 3"}')]),
                  Answer(content="It is 5."))  # fmt: skip
    r = invoke("chat", "--json", "-m", "work:some-model", "what is 2 + 3?")
    assert r.exit_code == 0, r.stderr
    assert _offered(server) == [True, True]
    assert [p["name"] for p in payloads(r, "tool_result")] == ["calculator"]
    assert "".join(payloads(r, "token")) == "It is 5." and r.stderr == ""


def test_a_server_refusing_tools_is_asked_again_without_them_and_remembered(
        server, isolated_env):  # fmt: skip
    _profile(server, isolated_env, None)
    server.refuse_tools = True
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    assert "".join(payloads(r, "token")) == "Hello there."
    assert _offered(server) == [True, False]  # refused (400), then without tools
    assert '"code":"tools_unsupported"' in r.stderr and "refused tools" in r.stderr
    # The next command knows: one request, no tools, the same warning code.
    r = invoke("chat", "--json", "-m", "work:some-model", "hi again")
    assert r.exit_code == 0, r.stderr
    assert _offered(server) == [True, False, False]
    assert '"code":"tools_unsupported"' in r.stderr
    # Per model: the other model of the profile is still offered tools.
    r = invoke("chat", "--json", "-m", "work:other-model", "hi")
    assert _offered(server)[3:] == [True, False]


def test_capabilities_force_tools_on_or_off(server, isolated_env):
    _profile(server, isolated_env, "[]")
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    assert _offered(server) == [False]
    assert '"code":"tools_unsupported"' in r.stderr  # said, as for an Ollama model
    # Forced on: offered even after the server refused them once.
    _profile(server, isolated_env, '["tools"]')
    server.refuse_tools = True
    invoke("chat", "--json", "-m", "work:some-model", "hi")
    server.refuse_tools = False
    r = invoke("chat", "--json", "-m", "work:some-model", "hi")
    assert r.exit_code == 0, r.stderr
    assert _offered(server) == [False, True, False, True]
