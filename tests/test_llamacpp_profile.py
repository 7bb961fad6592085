"""A `kind = "llamacpp"` profile that cannot run here — its model_path is no file, or
llama-cpp-python (the `[llamacpp]` extra) is not installed — and a llamacpp profile asked
to embed. What the user sees is one line and the right exit code before anything loads,
is asked or is stored; `models list` and `config` say what the profile is.

These need no model: the profile is refused before one would load. The Ollama stand-in
embeds the collection, so the chat has sources to fall back on (four stage warnings, a
`Sources:` list and a stored conversation were what a broken profile produced).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.kb import make_corpus, snapshot
from tests.test_providers import write_config

QUESTION = "how do I set up the VPN with wireguard?"


def pocket(isolated_env: Path, model_path: Path, extra: str = "") -> None:
    write_config(isolated_env, f'[providers.pocket]\nkind = "llamacpp"\n'
                               f'model_path = "{model_path}"\n{extra}')  # fmt: skip


def conversations() -> int:
    r = invoke("history", "list", "--json")
    assert r.exit_code == 0, r.stderr
    return len(r.records())


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python as if not installed: `find_spec` is how localgpt asks."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))


@pytest.fixture
def corpus(standin, tmp_path: Path) -> Path:
    notes = make_corpus(tmp_path)
    r = invoke("ingest", str(notes))
    assert r.exit_code == 0, r.stderr
    return notes


@pytest.mark.parametrize("case", ["no_file", "no_extra"])
@pytest.mark.parametrize("json_out", [False, True])
def test_a_profile_that_cannot_run_is_one_line_before_anything(standin, corpus, isolated_env,
                                                               tmp_path, request, case,
                                                               json_out):  # fmt: skip
    gguf = tmp_path / "model.gguf"
    if case == "no_extra":
        gguf.write_bytes(b"GGUF")  # a file is there; the library to run it is not
        request.getfixturevalue("without_extra")
        expected = "Provider 'pocket' needs llama-cpp-python. Install it: pip install"
    else:
        expected = f"model_path of [providers.pocket] is not a file: {gguf}."
    pocket(isolated_env, gguf)
    before = conversations(), len(standin.chat_requests()), standin.embed_calls
    r = invoke("chat", *(["--json"] if json_out else []), "--provider", "pocket", QUESTION)
    assert r.exit_code == 6, r.stderr
    assert len(r.stderr.splitlines()) == 1 and expected in r.stderr, r.stderr
    if json_out:  # the error record, and nothing else
        assert [rec["type"] for rec in r.records()] == ["error"]
        assert r.records()[0]["code"] == "invalid_input"
    else:
        assert r.stdout == ""
    # nothing asked (no stage, no search) and nothing stored
    assert (conversations(), len(standin.chat_requests()), standin.embed_calls) == before


def test_models_list_warns_about_a_profile_that_cannot_run(isolated_env, tmp_path):
    pocket(isolated_env, tmp_path / "gone.gguf")
    r = invoke("models", "list", "--provider", "pocket")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[1].split("\t")[0] == "gone"  # still listed: it is configured
    assert r.stderr == (f"localgpt: warning: provider 'pocket': model_path of "
                        f"[providers.pocket] is not a file: {tmp_path}/gone.gguf. Point it at "
                        "a .gguf file.\n")  # fmt: skip


def test_config_shows_the_model_file_not_a_host(isolated_env, tmp_path):
    pocket(isolated_env, tmp_path / "smol.gguf")
    r = invoke("config")
    row = next(line for line in r.stdout.splitlines() if line.startswith("providers.pocket"))
    assert row.split("\t")[1] == f"llamacpp {tmp_path}/smol.gguf, model smol"
    record = next(rec for rec in invoke("config", "--json").records()
                  if rec["type"] == "provider")  # fmt: skip
    assert record["model_path"] == str(tmp_path / "smol.gguf") and record["base_url"] is None


def test_a_profile_without_default_model_offers_its_file(isolated_env, tmp_path, monkeypatch):
    """Not Ollama's llama3.2 (exit 4, "not offered"): the profile's model is its file."""
    pocket(isolated_env, tmp_path / "smol.gguf")
    monkeypatch.setenv("LOCALGPT_PROVIDER", "pocket")
    r = invoke("config", "--json")
    model = next(rec for rec in r.records() if rec.get("key") == "model")
    assert (model["value"], model["source"]) == ("smol", "default_model of [providers.pocket]")
    r = invoke("chat", "--provider", "pocket", "hi")  # refused for the missing file, not 4
    assert r.exit_code == 6 and "llama3.2" not in r.stderr


@pytest.mark.parametrize("args,env,code,where", [
    (["-m", "pocket:smol"], {}, 2, "(-m)"),
    (["--provider", "pocket", "-m", "x"], {}, 2, "(--provider)"),
    ([], {"LOCALGPT_EMBED_MODEL": "pocket:smol"}, 6, "(LOCALGPT_EMBED_MODEL)"),
])
def test_ingest_with_a_profile_that_cannot_embed_is_one_line(standin, corpus, isolated_env,
                                                             tmp_path, monkeypatch, args, env,
                                                             code, where):  # fmt: skip
    pocket(isolated_env, tmp_path / "smol.gguf")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    stored = snapshot(Path(isolated_env / "localgpt"))
    (corpus / "more.txt").write_text("A note about the printer on the second floor.\n")
    r = invoke("ingest", *args, str(corpus))
    assert r.exit_code == code, r.stderr
    assert r.stderr.splitlines() == [
        f"localgpt: error: Provider 'pocket' {where} runs a chat model in this process and "
        "cannot embed. Embed with an Ollama model, a local: model or an openai profile's "
        "model."]
    assert r.stdout == "" and snapshot(Path(isolated_env / "localgpt")) == stored
