"""The HTTP providers against servers that misbehave on the wire (issue 24, items 3 and
10): `--timeout` is the deadline to the first token, `idle_timeout` the limit between
tokens, a server that accepts and never answers ends by a limit, and a connection cut in
the middle of an SSE event is a lost connection. Each case runs `localgpt` as a process
under `bounded`, and checks the exit code, the one line on stderr, and what the history
keeps (messages counted before and after)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.faults import Bounded, Faults, bounded
from tests.misbehaving import MODEL, Misbehaving
from tests.served import Served

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-test-wire"


def messages(env: Path) -> list[tuple[str, str]]:
    """(role, content) of every stored message, oldest first."""
    path = env / "localgpt" / "history.db"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT role, content FROM messages ORDER BY rowid"))


def config(env: Path, text: str) -> None:
    path = env / "config" / "localgpt" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def profile(env: Path, url: str, extra: str = "") -> None:
    """`[providers.work]`: the OpenAI wire at `url`; `extra` goes at the top of the file."""
    config(env, f'{extra}\n[providers.work]\nkind = "openai"\nbase_url = "{url}/v1"\n'
                f'default_model = "{MODEL}"\n')  # fmt: skip


def localgpt(*args: str, deadline: float):
    return bounded([sys.executable, "-m", "localgpt_cli", *args], deadline,
                   env=dict(os.environ), cwd=str(ROOT))  # fmt: skip


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# -- item 3: the OpenAI wire ----------------------------------------------------------------


def test_sse_comments_every_second_do_not_outlive_timeout(isolated_env):
    """Before: each comment reset the read timeout, and the command never ended."""
    with Misbehaving("keepalive", every=1.0) as server:
        profile(isolated_env, server.url)
        r = localgpt("chat", "--timeout", "3", "-m", f"work:{MODEL}", "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert r.seconds < 15, r.seconds
    line = one_line(r.stderr)
    assert "sent no answer within 3 s" in line and "--timeout" in line, line
    assert r.stdout == ""
    # the question is kept, and the answer as far as it came: empty
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "")]


def test_tokens_then_only_comments_end_at_the_idle_limit_keeping_the_partial_answer(
        isolated_env):  # fmt: skip
    with Misbehaving("stall", every=1.0) as server:
        profile(isolated_env, server.url, "idle_timeout = 3")
        r = localgpt("chat", "-m", f"work:{MODEL}", "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("Partial answer"), r.stdout
    line = one_line(r.stderr)
    assert "no token for 3 s" in line and "idle_timeout" in line, line
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "Partial answer")]


def test_a_server_that_accepts_and_never_answers_ends_at_timeout(isolated_env):
    with Misbehaving("silent") as server:
        profile(isolated_env, server.url, "timeout = 3")
        r = localgpt("chat", "-m", f"work:{MODEL}", "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert "sent no answer within 3 s" in one_line(r.stderr)
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "")]


def test_with_no_timeout_set_a_silent_server_ends_at_the_default_limit(
        isolated_env, monkeypatch):  # fmt: skip
    """No --timeout, no `timeout` in the file: the default first-token limit still ends
    the wait (shortened here; the figure itself is DEFAULT_FIRST_TOKEN, 600 s)."""
    from localgpt_cli.llm import deadline
    from localgpt_cli.llm.openai import OpenAIProvider

    monkeypatch.setattr(deadline, "DEFAULT_FIRST_TOKEN", 2.0)
    with Misbehaving("silent") as server:
        provider = OpenAIProvider(server.url + "/v1")
        assert provider.limits.first == 2.0
        from localgpt_cli.errors import OllamaTimeout

        with pytest.raises(OllamaTimeout, match="within 2 s"):
            list(provider.chat_stream(MODEL, [{"role": "user", "content": "hi"}]))


def test_embeddings_from_a_silent_server_end_at_timeout(isolated_env):
    from localgpt_cli.errors import OllamaTimeout
    from localgpt_cli.llm.ollama import OllamaClient
    from localgpt_cli.llm.openai import OpenAIProvider

    with Misbehaving("silent") as server:
        for provider in (OpenAIProvider(server.url + "/v1", timeout=2),
                         OllamaClient(server.url, timeout=2)):  # fmt: skip
            with pytest.raises(OllamaTimeout, match="within 2 s"):
                provider.embed(MODEL, ["a passage"])


# -- item 3: Ollama's NDJSON ---------------------------------------------------------------


def test_ollama_empty_chunks_every_second_do_not_outlive_timeout(isolated_env, monkeypatch):
    with Misbehaving("keepalive", every=1.0) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        r = localgpt("chat", "--timeout", "3", "-m", MODEL, "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert "sent no answer within 3 s" in one_line(r.stderr)
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "")]


def test_ollama_tokens_then_empty_chunks_end_at_the_idle_limit(isolated_env, monkeypatch):
    with Misbehaving("stall", every=1.0) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        config(isolated_env, "idle_timeout = 3\n")
        r = localgpt("chat", "-m", MODEL, "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert "no token for 3 s" in one_line(r.stderr)
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "Partial answer")]


def test_ollama_that_accepts_and_never_answers_ends_at_timeout(isolated_env, monkeypatch):
    with Misbehaving("silent") as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        r = localgpt("chat", "--timeout", "3", "-m", MODEL, "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert "within 3 s" in one_line(r.stderr)


# -- item 10: a connection cut in the middle of an SSE event -------------------------------


def test_a_cut_in_the_middle_of_an_event_is_a_lost_connection(isolated_env):
    """Before: the half event was parsed, and the command exited 1 with `bad_response`."""
    with Misbehaving("cut_event") as server:
        profile(isolated_env, server.url)
        r = localgpt("chat", "--json", "-m", f"work:{MODEL}", "hi", deadline=10)
    assert r.returncode == 3, r.stderr
    assert '"code":"connection_lost"' in r.stdout, r.stdout
    assert "bad_response" not in r.stdout + r.stderr
    assert messages(isolated_env) == [("user", "hi"), ("assistant", "Partial answer")]


# -- the stand-ins as processes: hang, die, restart, refuse ---------------------------------
# Each answer is 40 tokens 0.25 s apart: a fault injected at the first token lands mid-answer.

SLOW = ("--tokens", "40", "--delay", "0.25")


@pytest.fixture(params=["ollama", "openai"])
def served(request, isolated_env, monkeypatch):
    """(the server process, the -m value that reaches it) for Ollama and the OpenAI wire."""
    if request.param == "ollama":
        server = Served("tests.standin", *SLOW).start()
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        config(isolated_env, "idle_timeout = 3\n")
        model = "llama3.2"
    else:
        server = Served("tests.openai_standin", *SLOW, "--key", KEY).start()
        monkeypatch.setenv("WORK_API_KEY", KEY)
        config(isolated_env, f'idle_timeout = 3\n[providers.work]\nkind = "openai"\n'
               f'base_url = "{server.url}"\napi_key_env = "WORK_API_KEY"\n')  # fmt: skip
        model = "work:some-model"
    yield server, model
    Faults(server).resume()
    server.stop()


def mid_answer(action, *args: str, deadline: float) -> Bounded:
    """`localgpt ARGS`, with `action` (the fault) done once its first token is out: as
    `bounded`, failing the test if the command outlives `deadline` plus 10 s."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "localgpt_cli", *args], text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ), cwd=str(ROOT))
    guard = threading.Timer(deadline + 10, proc.kill)
    guard.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.read(4)  # "tok ": the answer is under way
        action()
        # read on from the same buffered stream (communicate() would skip its buffer)
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait()
    finally:
        guard.cancel()
    seconds = time.monotonic() - start
    assert seconds < deadline + 10, f"{args} still running after {deadline + 10:.0f} s: {err}"
    return Bounded(proc.returncode, first + out, err, seconds)


def test_served_hung_mid_answer_ends_at_the_idle_limit_keeping_the_partial_answer(
        served, isolated_env):  # fmt: skip
    server, model = served
    faults = Faults(server)
    r = mid_answer(faults.hang, "chat", "-m", model, "count", deadline=15)
    faults.resume()
    assert r.returncode == 3, r.stderr
    assert "no token for 3 s" in one_line(r.stderr)
    (user, answer) = messages(isolated_env)
    assert user == ("user", "count") and answer[0] == "assistant"
    assert answer[1].startswith("tok") and answer[1].strip() == r.stdout.strip()


def test_served_hung_before_answering_ends_at_timeout(served, isolated_env):
    server, model = served
    faults = Faults(server)
    with faults.hung():
        r = localgpt("chat", "--timeout", "3", "-m", model, "count", deadline=10)
    assert r.returncode == 3, r.stderr
    assert "within 3 s" in one_line(r.stderr)
    assert messages(isolated_env) in ([], [("user", "count"), ("assistant", "")])


def test_served_killed_mid_answer_then_restarted(served, isolated_env):
    server, model = served
    faults = Faults(server)
    r = mid_answer(faults.kill, "chat", "-m", model, "count", deadline=15)
    assert r.returncode == 3, r.stderr
    assert "lost mid-answer" in one_line(r.stderr) or "ended before" in r.stderr, r.stderr
    (_, answer) = messages(isolated_env)
    assert answer[1].startswith("tok") and answer[1].strip() == r.stdout.strip()
    # down: refused at once, one line; the question and an empty answer are stored (the
    # model's facts were cached, so nothing was asked before the turn began)
    before = messages(isolated_env)
    r = localgpt("chat", "-m", model, "again", deadline=10)
    assert r.returncode == 3 and "not reachable" in one_line(r.stderr), r.stderr
    kept = messages(isolated_env)
    assert kept == [*before, ("user", "again"), ("assistant", "")]
    server.start()  # restarted on the same port
    r = localgpt("chat", "-m", model, "count", deadline=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "tok " * 40 + "\n"
    assert messages(isolated_env)[: len(kept)] == kept
    assert messages(isolated_env)[-2:] == [("user", "count"), ("assistant", "tok " * 40)]


def test_served_refuses_an_unknown_model_or_a_bad_key(served, isolated_env, monkeypatch):
    server, model = served
    before = messages(isolated_env)
    if model.startswith("work:"):
        monkeypatch.setenv("WORK_API_KEY", "sk-wrong")
        r = localgpt("chat", "-m", model, "hi", deadline=10)
        assert r.returncode == 77 and "$WORK_API_KEY" in one_line(r.stderr), r.stderr
    else:
        r = localgpt("chat", "-m", "no-such-model", "hi", deadline=10)
        assert r.returncode == 4 and "'no-such-model'" in one_line(r.stderr), r.stderr
    assert messages(isolated_env) == before


# -- the abandoned reader: its connection is closed, not left to the server ----------------


def _open_connections(port: int) -> int:
    """Established TCP connections from this host to 127.0.0.1:`port` (/proc/net/tcp)."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.read().splitlines()[1:]]
    return sum(1 for row in rows if row[3] == "01" and int(row[2].split(":")[1], 16) == port)


@pytest.mark.parametrize("wire", ["openai", "ollama"])
def test_an_expired_stream_of_keepalives_closes_its_connection(isolated_env, wire):
    """Before: the OpenAI reader dropped SSE comments without looking up, so after the
    deadline it went on reading keep-alives for as long as the server sent them, holding
    the connection (and, on a real server, the request) open: in the REPL for ever."""
    from localgpt_cli.errors import OllamaTimeout
    from localgpt_cli.llm.ollama import OllamaClient
    from localgpt_cli.llm.openai import OpenAIProvider

    with Misbehaving("keepalive", every=0.3) as server:
        port = int(server.url.rsplit(":", 1)[1])
        provider = (OpenAIProvider(server.url + "/v1", timeout=2) if wire == "openai"
                    else OllamaClient(server.url, timeout=2))  # fmt: skip
        with pytest.raises(OllamaTimeout, match="within 2 s"):
            list(provider.chat_stream(MODEL, [{"role": "user", "content": "hi"}]))
        end = time.monotonic() + 15
        while _open_connections(port) and time.monotonic() < end:
            time.sleep(0.2)
        assert _open_connections(port) == 0
