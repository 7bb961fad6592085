"""`localgpt models`: list (cached), show, ps, pull, in text and --json."""

from __future__ import annotations

import pytest

from tests.cli import invoke


def test_models_lists_by_default_as_records(standin):
    r = invoke("models", "--json")
    assert r.exit_code == 0
    names = [rec["name"] for rec in r.records()]
    assert "llama3.2:latest" in names and "nomic-embed-text:latest" in names
    rec = next(x for x in r.records() if x["name"] == "llama3.2:latest")
    assert rec["type"] == "model"
    assert set(rec) == {"type", "name", "size", "family", "parameters", "quantization",
                        "modified_at", "provider", "capabilities"}
    assert rec["capabilities"] == ["completion", "tools"]
    assert rec["provider"] == "ollama"
    assert isinstance(rec["size"], int) and rec["quantization"]


def test_models_list_is_cached_until_refresh(standin):
    invoke("models", "list")
    invoke("models", "list")
    tags = [r for r in standin.requests if r.path == "/api/tags"]
    assert len(tags) == 1
    invoke("models", "list", "--refresh")
    assert len([r for r in standin.requests if r.path == "/api/tags"]) == 2


def test_models_plain_output_is_tab_separated(standin):
    r = invoke("models")
    lines = r.stdout.splitlines()
    assert lines[0].split("\t")[:3] == ["NAME", "SIZE", "FAMILY"]
    assert any(line.startswith("llama3.2:latest\t") for line in lines)


def test_models_show(standin):
    r = invoke("models", "show", "qwen3", "--json")
    assert r.exit_code == 0
    (rec,) = r.records()
    assert rec["type"] == "model_info"
    assert "thinking" in rec["capabilities"] and "tools" in rec["capabilities"]
    assert rec["context_length"] > 0
    r = invoke("models", "show", "qwen3")
    assert "capabilities" in r.stdout and "thinking" in r.stdout


def test_models_show_unknown_exits_4(standin):
    r = invoke("models", "show", "nope")
    assert r.exit_code == 4
    assert "nope" in r.stderr and "Installed:" in r.stderr


def test_models_ps_after_a_chat(standin):
    invoke("chat", "hi")
    r = invoke("models", "ps", "--json")
    assert [rec["name"] for rec in r.records()] == ["llama3.2:latest"]


def test_models_pull_json_records_and_unknown(standin):
    r = invoke("models", "pull", "all-minilm", "--json")
    assert r.exit_code == 0, r.stderr
    statuses = [rec["status"] for rec in r.records()]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    r = invoke("models", "pull", "does-not-exist", "--json")
    assert r.exit_code == 4
    assert r.records()[-1]["type"] == "error"


def test_models_unreachable_exits_3(isolated_env):
    r = invoke("models", "--refresh")
    assert r.exit_code == 3
    assert "not reachable" in r.stderr


def test_config_shows_sources(isolated_env, monkeypatch):
    monkeypatch.setenv("LOCALGPT_MODEL", "qwen3")
    r = invoke("--host", "gpu:1234", "config", "--json")
    recs = {x["key"]: x for x in r.records() if x["type"] == "setting"}
    assert recs["model"]["value"] == "qwen3" and recs["model"]["source"] == "env LOCALGPT_MODEL"
    assert recs["host"]["value"] == "http://gpu:1234" and recs["host"]["source"] == "flag"


def test_a_bare_name_falls_back_to_the_one_installed_tag(standin):
    standin.add_model("qwen3:8b", capabilities=("completion", "tools", "thinking"))
    standin.add_model("llama3.2:latest", capabilities=("completion",))
    r = invoke("models", "show", "qwen3", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.records()[0]["name"] == "qwen3:8b"
    assert '"code":"model_resolved"' in r.stderr and "qwen3:8b" in r.stderr
    plain = invoke("models", "show", "qwen3")
    assert plain.stderr == (
        "localgpt: warning: 'qwen3' is not installed as qwen3:latest; using qwen3:8b, the "
        "only qwen3 installed.\n"
    )
    r = invoke("chat", "-m", "qwen3", "--json", "hi")
    assert r.exit_code == 0, r.stderr
    assert {body["model"] for body in standin.chat_requests()} == {"qwen3:8b"}
    listed = invoke("history", "--json").records()
    assert listed[0]["model"] == "qwen3:8b"


@pytest.mark.parametrize("installed", [("qwen3:8b", "qwen3:4b"), ("qwen3:8b", "qwen3:latest")])
def test_no_fallback_when_the_name_is_installed_or_ambiguous(standin, installed):
    for name in installed:
        standin.add_model(name, capabilities=("completion",))
    r = invoke("models", "show", "qwen3", "--json")
    if "qwen3:latest" in installed:
        assert r.exit_code == 0 and r.records()[0]["name"] == "qwen3"
    else:
        assert r.exit_code == 4 and "qwen3:8b" in r.stderr and "qwen3:4b" in r.stderr
    assert "model_resolved" not in r.stderr
    r = invoke("models", "show", "qwen3:1b")  # a tag was given: it is meant
    assert r.exit_code == 4 and "model_resolved" not in r.stderr


def test_an_embedding_model_name_resolves_the_same_way(standin, tmp_path):
    standin.add_model("all-minilm:l6-v2", capabilities=("embedding",), embedding_dim=384)
    standin.add_model("llama3.2:latest", capabilities=("completion",))
    (tmp_path / "vpn.md").write_text("# VPN\n\nInstall wireguard for the office tunnel.\n")
    r = invoke("ingest", "-m", "all-minilm", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert "using all-minilm:l6-v2, the only all-minilm installed" in r.stderr
    embeds = [q.body for q in standin.requests if q.path == "/api/embed"]
    assert embeds and {b["model"] for b in embeds} == {"all-minilm:l6-v2"}
    assert invoke("docs", "stats", "--json").records()[0]["model"] == "all-minilm:l6-v2"
    found = invoke("search", "-m", "all-minilm", "--mode", "vector", "wireguard", "--json")
    assert found.exit_code == 0, found.stderr
    assert found.records() and found.records()[0]["mode"] == "vector"
