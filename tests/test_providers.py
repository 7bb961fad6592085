"""Providers beyond the chat: embeddings through a profile, `models list` across providers,
`--provider`, unknown names, `config`'s masked keys, and the provider of each stored answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import invoke
from tests.openai_standin import Answer, OpenAIStandIn
from tests.standin import Reply

KEY = "sk-test-secret-abcdef-1234"
EMBED = "text-embedding-3-small"


def write_config(root: Path, text: str) -> None:
    config = root / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


@pytest.fixture
def server(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStandIn]:
    """The OpenAI stand-in as profile `work`; a profile `down` that nothing answers."""
    with OpenAIStandIn(models=("some-model", EMBED), key=KEY) as s:
        write_config(isolated_env,
                     f'[providers.work]\nkind = "openai"\nbase_url = "{s.url}"\n'
                     'api_key_env = "WORK_API_KEY"\ndefault_model = "some-model"\n')
        monkeypatch.setenv("WORK_API_KEY", KEY)
        yield s


def posts(server: OpenAIStandIn, path: str) -> list[dict]:
    return [q["body"] for q in server.requests if q["path"] == path]


def payloads(r, kind: str) -> list:
    return [p["payload"] for p in r.records() if p["type"] == kind]


# -- embeddings ----------------------------------------------------------------


def test_ingest_and_search_embed_through_a_profile(server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.txt").write_text("The coolant pump runs at 3000 rpm.\n")
    r = invoke("ingest", "--json", "-m", f"work:{EMBED}", str(docs))
    assert r.exit_code == 0, r.stderr
    bodies = posts(server, "/v1/embeddings")
    assert bodies and {b["model"] for b in bodies} == {EMBED}  # the prefix stays here
    assert any("coolant pump" in text for b in bodies for text in b["input"])
    r = invoke("docs", "collections", "--json")
    assert [c["model"] for c in r.records()] == [f"work:{EMBED}"]
    # The collection remembers its embedder: search needs no -m, and asks the profile.
    r = invoke("search", "--json", "--mode", "vector", "pump speed")
    assert r.exit_code == 0, r.stderr
    assert Path(r.records()[0]["path"]).name == "pump.txt"
    assert posts(server, "/v1/embeddings")[-1]["input"] == ["pump speed"]


def test_provider_flag_on_ingest_means_the_same_as_the_prefix(server, tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta gamma\n")
    r = invoke("ingest", "--provider", "work", "-m", EMBED, str(tmp_path / "a.txt"))
    assert r.exit_code == 0, r.stderr
    assert invoke("docs", "collections", "--json").records()[0]["model"] == f"work:{EMBED}"
    r = invoke("ingest", "--provider", "work", str(tmp_path / "a.txt"))
    assert r.exit_code == 2 and "needs the embedding model" in r.stderr


def test_an_embedding_model_the_profile_lacks_exits_4_naming_the_provider(server, tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta gamma\n")
    r = invoke("ingest", "-m", "work:nope", str(tmp_path / "a.txt"))
    assert r.exit_code == 4, r.stderr
    assert "not offered by provider 'work'" in r.stderr and "Traceback" not in r.stderr


# -- models list across providers -----------------------------------------------


def test_models_list_shows_every_provider_with_its_name(server, standin):
    r = invoke("models", "list", "--json")
    assert r.exit_code == 0, r.stderr
    by_provider = {(m["provider"], m["name"]) for m in r.records()}
    assert ("work", "some-model") in by_provider and ("ollama", "llama3.2:latest") in by_provider
    text = invoke("models", "list").stdout.splitlines()
    assert text[0].split("\t")[-1] == "PROVIDER"
    assert any(line.startswith("some-model\t") and line.endswith("\twork") for line in text)


def test_an_unreachable_provider_is_a_warning_when_another_answers(server):
    r = invoke("models", "list", "--json")  # no Ollama at OLLAMA_HOST
    assert r.exit_code == 0, r.stderr
    assert {m["provider"] for m in r.records()} == {"work"}
    assert '"type":"warning","code":"provider_unreachable"' in r.stderr
    assert "provider 'ollama'" in r.stderr


def test_no_provider_answering_is_the_error_itself(isolated_env):
    write_config(isolated_env, '[providers.down]\nkind = "openai"\n'
                               'base_url = "http://127.0.0.1:9/v1"\n')
    r = invoke("models", "list")
    assert r.exit_code == 3, r.stderr
    assert "localgpt: error:" in r.stderr and "Traceback" not in r.stderr


def test_models_list_provider_flag_asks_that_one_only(server, standin):
    r = invoke("models", "list", "--json", "--provider", "work")
    assert r.exit_code == 0, r.stderr
    assert {m["provider"] for m in r.records()} == {"work"}
    assert not [q for q in standin.requests if q.path == "/api/tags"]


def test_models_show_asks_the_provider_named(server):
    r = invoke("models", "show", "--provider", "work", "some-model", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.records()[0]["name"] == "some-model"
    r = invoke("models", "show", "-p", "work", "nope")
    assert r.exit_code == 4 and "Offered: some-model, text-embedding-3-small." in r.stderr


# -- --provider and unknown names -----------------------------------------------


def test_provider_flag_on_chat_uses_its_default_model(server):
    server.script(Answer(content="From work."))
    r = invoke("chat", "--json", "--provider", "work", "hi")
    assert r.exit_code == 0, r.stderr
    done = payloads(r, "done")[0]
    assert (done["provider"], done["model"]) == ("work", "some-model")


def test_provider_flag_with_a_model(server):
    server.script(Answer(content="ok"))
    r = invoke("chat", "--json", "--provider", "work", "-m", EMBED, "hi")
    assert r.exit_code == 0, r.stderr
    assert posts(server, "/v1/chat/completions")[-1]["model"] == EMBED


@pytest.mark.parametrize(("args", "env", "code", "where"), [
    (("--provider", "play"), None, 2, "--provider"),
    (("-m", "play:"), None, 2, "--model"),
    ((), "play", 6, "LOCALGPT_PROVIDER"),
])  # fmt: skip
def test_an_unknown_provider_is_one_line_naming_the_configured_ones(
        server, monkeypatch, args, env, code, where):
    if env:
        monkeypatch.setenv("LOCALGPT_PROVIDER", env)
    r = invoke("chat", *args, "hi")
    assert r.exit_code == code, r.stderr
    assert r.stderr.startswith(f"localgpt: error: No provider profile 'play' ({where})")
    assert "configured: ollama, work." in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_config_fails_clearly_on_an_unknown_provider_env(server, monkeypatch):
    monkeypatch.setenv("LOCALGPT_PROVIDER", "play")
    r = invoke("config")
    assert r.exit_code == 6 and "LOCALGPT_PROVIDER" in r.stderr and "Traceback" not in r.stderr


def test_config_masks_the_key_and_says_where_the_provider_came_from(server, monkeypatch):
    monkeypatch.setenv("LOCALGPT_PROVIDER", "work")
    r = invoke("config", "--json")
    assert r.exit_code == 0, r.stderr
    records = r.records()
    (provider,) = [x for x in records if x["type"] == "provider"]
    assert provider["api_key"] == "$WORK_API_KEY (set: ****1234)"
    setting = next(x for x in records if x.get("key") == "provider")
    assert (setting["value"], setting["source"]) == ("work", "env LOCALGPT_PROVIDER")
    model = next(x for x in records if x.get("key") == "model")
    assert model["source"] == "default_model of [providers.work]"
    text = invoke("config").stdout
    assert "key $WORK_API_KEY (set: ****1234)" in text
    assert KEY not in r.stdout + text
    monkeypatch.delenv("WORK_API_KEY")
    assert "$WORK_API_KEY (not set)" in invoke("config").stdout


# -- history: the provider of each answer, and -c ----------------------------------


def test_history_records_provider_and_model_and_c_continues_on_it(server, standin,
                                                                  isolated_env):
    server.script(Answer(content="First."), Answer(content="Second."))
    assert invoke("chat", "-m", "work:some-model", "one").exit_code == 0
    r = invoke("chat", "--json", "-c", "two")  # no -m: back to the profile it was on
    assert r.exit_code == 0, r.stderr
    done = payloads(r, "done")[0]
    assert (done["provider"], done["model"]) == ("work", "some-model")
    assert [b["messages"][-1]["content"] for b in posts(server, "/v1/chat/completions")] \
        == ["one", "two"]  # fmt: skip
    with SQLiteStore.open(isolated_env / "localgpt" / "history.db") as store:
        conversation = store.latest()
        assert conversation is not None
        answers = [m for m in store.messages(conversation.id) if m.role == "assistant"]
    assert [(m.metadata["provider"], m.metadata["model"]) for m in answers] \
        == [("work", "some-model")] * 2  # fmt: skip
    shown = invoke("history", "show", conversation.id).stdout
    assert "## assistant · work:some-model" in shown
    # -m says otherwise: the next answer comes from Ollama, and says so.
    standin.script(Reply(content="From Ollama."))
    r = invoke("chat", "--json", "-c", "-m", "llama3.2", "three")
    assert r.exit_code == 0, r.stderr
    assert payloads(r, "done")[0]["provider"] == "ollama"


def test_continuing_on_a_provider_no_longer_configured_is_one_line(server, isolated_env):
    server.script(Answer(content="First."))
    assert invoke("chat", "-m", "work:some-model", "one").exit_code == 0
    write_config(isolated_env, "")
    r = invoke("chat", "-c", "two")
    assert r.exit_code == 6, r.stderr
    assert "provider 'work'" in r.stderr and "--provider" in r.stderr


# -- the in-process llama.cpp profile: what is refused before any model loads ----------


def test_a_llamacpp_profile_without_model_path_is_one_line(isolated_env):
    write_config(isolated_env, '[providers.pocket]\nkind = "llamacpp"\n')
    r = invoke("chat", "--provider", "pocket", "hi")
    assert r.exit_code == 6
    assert "[providers.pocket]" in r.stderr and "model_path for llamacpp" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_llamacpp_model_path_that_is_no_file_is_one_line(isolated_env, tmp_path):
    write_config(isolated_env, '[providers.pocket]\nkind = "llamacpp"\n'
                               f'model_path = "{tmp_path}/none.gguf"\ndefault_model = "m"\n')
    r = invoke("chat", "--provider", "pocket", "--no-save", "hi")
    assert r.exit_code == 6, r.stderr
    assert f"is not a file: {tmp_path}/none.gguf" in r.stderr and "Traceback" not in r.stderr


def test_search_and_eval_with_provider_alone_use_the_collections_model(server, standin,
                                                                        tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.txt").write_text("The coolant pump runs at 3000 rpm.\n")
    (docs / "fan.txt").write_text("The fan spins when the board is hot.\n")
    assert invoke("ingest", "-m", f"work:{EMBED}", str(docs)).exit_code == 0
    r = invoke("search", "--provider", "work", "--json", "--mode", "vector", "pump speed")
    assert r.exit_code == 0, r.stderr
    assert Path(r.records()[0]["path"]).name == "pump.txt"
    assert posts(server, "/v1/embeddings")[-1] == {"model": EMBED, "input": ["pump speed"]}
    (tmp_path / "q.txt").write_text("pump speed\n")
    (tmp_path / "r.tsv").write_text("1\tpump\t1\n")
    r = invoke("eval", "--provider", "work", "--mode", "vector", "--json",
               "--queries", str(tmp_path / "q.txt"), "--qrels", str(tmp_path / "r.tsv"))
    assert r.exit_code == 0, r.stderr
    assert posts(server, "/v1/embeddings")[-1]["input"] == ["pump speed"]
    # ingested on another provider: one line naming the collection's provider:model
    for args in (("search", "--provider", "ollama", "pump"),
                 ("eval", "--provider", "ollama", "--queries", str(tmp_path / "q.txt"),
                  "--qrels", str(tmp_path / "r.tsv"))):
        r = invoke(*args)
        assert r.exit_code == 2 and r.stdout == "", r.stderr
        (line,) = r.stderr.splitlines()
        assert line.startswith("localgpt: error: --provider ollama: collection 'default' was "
                               f"ingested with work:{EMBED}, so 'work' must embed")
        assert "localgpt ingest --force -C default --provider ollama -m MODEL" in line
    assert not [q for q in standin.requests if q.path == "/api/embed"]


def test_search_with_another_providers_collection_names_its_model(server, standin, tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta gamma\n")
    assert invoke("ingest", "-C", "notes", str(tmp_path / "a.txt")).exit_code == 0
    model = invoke("docs", "collections", "--json").records()[0]["model"]
    r = invoke("search", "-C", "notes", "--provider", "work", "alpha")
    assert r.exit_code == 2, r.stderr
    assert f"was ingested with ollama:{model}, so 'ollama' must embed" in r.stderr
    assert posts(server, "/v1/embeddings") == []
    r = invoke("search", "-C", "notes", "--provider", "ollama", "--json", "alpha")
    assert r.exit_code == 0 and Path(r.records()[0]["path"]).name == "a.txt"
    r = invoke("search", "-C", "nothing", "--provider", "work", "alpha")
    assert r.exit_code == 6 and "does not exist" in r.stderr  # no collection, no model
