"""The standing fault rule against a real llama.cpp server (`python -m llama_cpp.server`
with the SmolLM2 GGUF, as tests/test_llamacpp_server.py starts it, here with --api_key):
hung (SIGSTOP) mid-answer and before it, killed (SIGKILL) mid-stream, restarted, and
refusing a bad key or a model it does not serve. Each run is bounded, and checks the exit
code, the one line on stderr and the history's messages before and after."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Faults
from tests.requires import unavailable
from tests.test_faults_wire import config, localgpt, messages, mid_answer, one_line
from tests.test_llamacpp_server import ALIAS, START_SECONDS, _free_port, gguf, missing

KEY = "sk-llama-fault"
LONG = ("-o", "seed", "1", "-o", "temperature", "0", "-o", "num_predict", "200",
        "Count from one to one hundred in words, one number per line.")  # fmt: skip


class LlamaServer:
    """The server as a component of tests/faults.py: restarted on the same port."""

    def __init__(self, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LlamaServer:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf()),
                   "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                   "--n_ctx", "2048", "--n_threads", "2", "--api_key", KEY]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Until /v1/models answers the key (test_llamacpp_server's wait asks without one)."""
        assert self.proc is not None
        request = urllib.request.Request(f"{self.url}/models",
                                         headers={"Authorization": f"Bearer {KEY}"})
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(request, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        pytest.fail("llama_cpp.server did not start:\n"
                    + self.log.read_text(errors="replace")[-3000:])  # fmt: skip

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = missing()
    if reason is not None:
        unavailable(reason)
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log").start()
    try:
        yield server
    finally:
        Faults(server).resume()
        server.stop()


@pytest.fixture
def llama_profile(llama: LlamaServer, isolated_env: Path, monkeypatch) -> str:
    """`-m` for the server's model through a `[providers.llama]` profile with its key."""
    if not llama.pids():  # a test before this one killed it
        llama.start()
    monkeypatch.setenv("LLAMA_KEY", KEY)
    config(isolated_env, f'idle_timeout = 5\n[providers.llama]\nkind = "openai"\n'
           f'base_url = "{llama.url}"\napi_key_env = "LLAMA_KEY"\n')  # fmt: skip
    return f"llama:{ALIAS}"


def test_llama_server_hung_mid_answer_ends_at_the_idle_limit(llama, llama_profile,
                                                             isolated_env):  # fmt: skip
    faults = Faults(llama)
    try:
        r = mid_answer(faults.hang, "chat", "-m", llama_profile, *LONG, deadline=60)
    finally:
        faults.resume()
    assert r.returncode == 3, r.stderr
    assert "no token for 5 s" in one_line(r.stderr)
    (user, answer) = messages(isolated_env)
    assert user[0] == "user" and answer[0] == "assistant"
    assert answer[1].strip() and answer[1].strip() == r.stdout.strip()  # the partial answer


def test_llama_server_hung_before_answering_ends_at_timeout(llama, llama_profile,
                                                            isolated_env):  # fmt: skip
    with Faults(llama).hung():
        r = localgpt("chat", "--timeout", "4", "-m", llama_profile, "hi", deadline=20)
    assert r.returncode == 3, r.stderr
    assert "within 4 s" in one_line(r.stderr)
    assert messages(isolated_env) in ([], [("user", "hi"), ("assistant", "")])


def test_llama_server_killed_mid_answer_then_restarted(llama, llama_profile, isolated_env):
    r = mid_answer(Faults(llama).kill, "chat", "-m", llama_profile, *LONG, deadline=60)
    assert r.returncode == 3, r.stderr
    line = one_line(r.stderr)
    assert "lost mid-answer" in line or "ended before" in line, line
    before = messages(isolated_env)
    assert [m[0] for m in before] == ["user", "assistant"]
    assert before[1][1].strip() == r.stdout.strip()
    r = localgpt("chat", "-m", llama_profile, "hi", deadline=20)
    assert r.returncode == 3 and "not reachable" in one_line(r.stderr), r.stderr
    # the model's facts were cached, so the question was stored before the refusal
    kept = messages(isolated_env)
    assert kept == [*before, ("user", "hi"), ("assistant", "")]
    llama.start()
    r = localgpt("chat", "-m", llama_profile, "-o", "num_predict", "8", "Say hi.", deadline=60)
    assert r.returncode == 0, r.stderr
    after = messages(isolated_env)
    assert after[: len(kept)] == kept and [m[0] for m in after[len(kept):]] == ["user",
                                                                               "assistant"]


def test_llama_server_refuses_a_bad_key_and_an_unknown_model(
        llama, llama_profile, isolated_env, monkeypatch):  # fmt: skip
    monkeypatch.setenv("LLAMA_KEY", "sk-wrong")
    r = localgpt("chat", "-m", llama_profile, "hi", deadline=20)
    assert r.returncode == 77, r.stderr
    assert "$LLAMA_KEY" in one_line(r.stderr)
    monkeypatch.setenv("LLAMA_KEY", KEY)
    r = localgpt("chat", "-m", "llama:no-such-model", "hi", deadline=20)
    assert r.returncode == 4, r.stderr
    assert "'no-such-model'" in one_line(r.stderr) and f"Offered: {ALIAS}." in r.stderr
    assert messages(isolated_env) == []
