"""The Ollama stand-in, checked through the real `ollama` client and raw sockets.

Every other chat test trusts the stand-in to behave like Ollama; these tests are what
earns that trust, so they go through the same client the CLI uses.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import ollama
import pytest

from tests.standin import Reply, StandIn, hashed_embeddings, normalize_name, split_pieces

HI = [{"role": "user", "content": "hi"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate arithmetic",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


# Built once: each Client would otherwise load the CA bundle again (~40 ms) for plain http.
TLS = httpx.create_ssl_context()


@pytest.fixture
def client(standin: StandIn) -> ollama.Client:
    return ollama.Client(host=standin.url, verify=TLS)


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _raw_http(url: str, request: bytes) -> bytes:
    """Send one request on a fresh socket and read until the server closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def _dechunk(body: bytes) -> tuple[list[bytes], bool]:
    """Split a chunked body into its chunks; say whether the terminating chunk came."""
    chunks = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return chunks, rest == b"\r\n"
        chunks.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        body = rest[size + 2 :]
    return chunks, False


# --- chat streaming -------------------------------------------------------------------------


def test_stream_yields_scripted_thinking_then_content_then_tool_calls(standin, client):
    standin.script(
        Reply(
            thinking=["Let me ", "compute."],
            content=["The answer ", "is ", "4."],
            tool_calls=[{"name": "calculator", "arguments": {"expression": "2+2"}}],
            prompt_eval_count=31,
        )
    )
    parts = list(client.chat(model="qwen3", messages=HI, tools=[TOOL], stream=True))

    assert [p.message.thinking for p in parts[:2]] == ["Let me ", "compute."]
    assert all(p.message.content == "" for p in parts[:2])
    assert [p.message.content for p in parts[2:5]] == ["The answer ", "is ", "4."]
    call_chunk, done = parts[5], parts[6]
    assert call_chunk.done is False and call_chunk.message.content == ""
    (call,) = call_chunk.message.tool_calls
    assert call.function.name == "calculator"
    assert call.function.arguments == {"expression": "2+2"}
    assert done.done is True and done.done_reason == "stop" and len(parts) == 7
    assert done.prompt_eval_count == 31 and done.eval_count == 3
    for name in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(getattr(done, name), int) and getattr(done, name) > 0
    assert done.model == "qwen3" and done.created_at.endswith("Z")


def test_tool_calls_can_arrive_on_the_done_chunk(standin, client):
    standin.script(
        Reply(
            tool_calls=[
                {"name": "calculator", "arguments": {"expression": "1+1"}},
                {"function": {"name": "clock", "arguments": {}}},
            ],
            tool_calls_on_done=True,
        )
    )
    parts = list(client.chat(model="llama3.2", messages=HI, tools=[TOOL], stream=True))
    assert len(parts) == 1 and parts[0].done
    assert [c.function.name for c in parts[0].message.tool_calls] == ["calculator", "clock"]
    assert parts[0].message.tool_calls[1].function.arguments == {}


def test_tool_calls_carry_ids_and_indexes_on_the_wire(standin):
    standin.script(Reply(tool_calls=[{"name": "a", "arguments": {}}, {"name": "b"}]))
    body = {"model": "llama3.2", "messages": HI, "stream": False}
    calls = httpx.post(f"{standin.url}/api/chat", json=body).json()["message"]["tool_calls"]
    assert [c["function"]["index"] for c in calls] == [0, 1]
    assert all(c["id"].startswith("call_") for c in calls) and calls[0]["id"] != calls[1]["id"]


def test_plain_string_content_is_split_into_word_chunks(standin, client):
    standin.script(Reply(content="Paris is the capital."))
    parts = list(client.chat(model="llama3.2", messages=HI, stream=True))
    assert [p.message.content for p in parts[:-1]] == ["Paris ", "is ", "the ", "capital."]
    assert split_pieces("  a  b \n") and "".join(split_pieces("  a  b \n")) == "  a  b \n"


def test_stream_false_concatenates_content_thinking_and_tool_calls(standin, client):
    standin.script(
        Reply(
            thinking="Two plus two.",
            content=["4", "."],
            tool_calls=[{"name": "calculator", "arguments": {"expression": "2+2"}}],
            done_reason="length",
        )
    )
    reply = client.chat(model="qwen3", messages=HI, stream=False)
    assert reply.message.content == "4."
    assert reply.message.thinking == "Two plus two."
    assert reply.message.tool_calls[0].function.name == "calculator"
    assert reply.done and reply.done_reason == "length" and reply.eval_count == 2


def test_default_reply_needs_no_script(client):
    reply = client.chat(model="llama3.2", messages=HI, stream=False)
    assert reply.message.content == "Hello from llama3.2."
    assert reply.message.thinking is None  # llama3.2 cannot think


def test_scripts_are_fifo_and_per_model_first(standin, client):
    standin.script(Reply(content="first"), Reply(content="second"))
    standin.script(Reply(content="for qwen"), model="qwen3")  # normalised to qwen3:latest
    assert standin.pending_replies == 3
    say = lambda model: client.chat(model=model, messages=HI, think=False).message.content  # noqa: E731
    assert say("qwen3:latest") == "for qwen"
    assert say("qwen3") == "first"
    assert say("llama3.2") == "second"
    assert say("llama3.2") == "Hello from llama3.2."
    assert standin.pending_replies == 0


def test_requests_are_recorded_as_the_client_sent_them(standin, client):
    client.chat(model="llama3.2", messages=HI, tools=[TOOL], options={"temperature": 0})
    (body,) = standin.chat_requests()
    assert body["model"] == "llama3.2" and body["messages"] == HI and body["stream"] is False
    assert body["tools"][0]["function"]["name"] == "calculator"
    assert body["options"] == {"temperature": 0}
    rec = standin.requests[-1]
    assert (rec.method, rec.path) == ("POST", "/api/chat")
    assert rec.headers["user-agent"].startswith("ollama-python/")


def test_script_rejects_malformed_replies(standin):
    with pytest.raises(ValueError, match="name"):
        standin.script(Reply(tool_calls=[{"arguments": {}}]))
    with pytest.raises(TypeError):
        standin.script("hello")  # type: ignore[arg-type]
    assert standin.pending_replies == 0


def test_delay_slows_the_stream_and_shows_in_durations(standin, client):
    standin.script(Reply(content=["a", "b", "c"], delay=0.05))
    start = time.perf_counter()
    parts = list(client.chat(model="llama3.2", messages=HI, stream=True))
    assert time.perf_counter() - start >= 0.15  # two gaps between chunks, one before done
    assert parts[-1].eval_duration >= 150_000_000
    assert parts[-1].total_duration >= parts[-1].eval_duration
    assert parts[0].created_at < parts[-1].created_at  # each chunk stamped when sent


def test_parallel_streams_are_served_concurrently(standin):
    # Every stream stalls 2 s after its first chunk; a server handling one connection at a
    # time could not deliver the second stream's first chunk within the 1.5 s timeout.
    standin.script(*[Reply(content=[f"s{i}", "end"], delay=2.0) for i in range(6)])
    client = ollama.Client(host=standin.url, verify=TLS, timeout=1.5)
    streams = [client.chat(model="llama3.2", messages=HI, stream=True) for _ in range(6)]
    try:
        assert [next(s).message.content for s in streams] == [f"s{i}" for i in range(6)]
    finally:
        for s in streams:
            s.close()


# --- failures -----------------------------------------------------------------------------


def test_mid_stream_error_raises_after_earlier_chunks(standin, client):
    standin.script(Reply(content=["a", "b", "c"], error_after=2))
    seen = []
    with pytest.raises(ollama.ResponseError) as info:
        for part in client.chat(model="llama3.2", messages=HI, stream=True):
            seen.append(part.message.content)
    assert seen == ["a", "b"]
    assert info.value.status_code == -1
    assert info.value.error == "an error was encountered while running the model"


def test_mid_stream_error_without_streaming_is_a_500(standin, client):
    standin.script(Reply(content=["a", "b"], error_after=1))
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="llama3.2", messages=HI)
    assert info.value.status_code == 500


def test_dropped_connection_raises_remote_protocol_error(standin, client):
    standin.script(Reply(content=["a", "b", "c"], drop_after=1))
    seen = []
    with pytest.raises(httpx.RemoteProtocolError):
        for part in client.chat(model="llama3.2", messages=HI, stream=True):
            seen.append(part.message.content)
    assert seen == ["a"]
    standin.script(Reply(content="x", drop_after=0))
    with pytest.raises(httpx.RemoteProtocolError):
        client.chat(model="llama3.2", messages=HI)


def test_scripted_http_error_status(standin, client):
    standin.script(Reply(http_status=503), Reply(http_status=500, http_error="boom"))
    with pytest.raises(ollama.ResponseError) as busy:
        list(client.chat(model="llama3.2", messages=HI, stream=True))
    assert busy.value.status_code == 503 and "server busy" in busy.value.error
    with pytest.raises(ollama.ResponseError) as boom:
        client.chat(model="llama3.2", messages=HI)
    assert (boom.value.status_code, boom.value.error) == (500, "boom")


def test_unknown_model_is_404(standin, client):
    standin.script(Reply(content="kept for later"))
    with pytest.raises(ollama.ResponseError) as chat:
        client.chat(model="llama9", messages=HI)
    assert (chat.value.status_code, chat.value.error) == (404, "model 'llama9' not found")
    with pytest.raises(ollama.ResponseError) as streamed:
        list(client.chat(model="llama9", messages=HI, stream=True))
    assert streamed.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as show:
        client.show("llama9")
    assert show.value.status_code == 404 and "not found" in show.value.error
    with pytest.raises(ollama.ResponseError) as embed:
        client.embed(model="llama9", input="x")
    assert embed.value.status_code == 404
    assert embed.value.error == 'model "llama9" not found, try pulling it first'
    assert standin.pending_replies == 1  # failed requests do not eat the script


def test_capability_errors(client):
    with pytest.raises(ollama.ResponseError) as tools:
        client.chat(model="gemma2", messages=HI, tools=[TOOL])
    assert tools.value.status_code == 400
    assert tools.value.error == "registry.ollama.ai/library/gemma2:latest does not support tools"
    with pytest.raises(ollama.ResponseError) as think:
        client.chat(model="gemma2", messages=HI, think=True)
    assert (think.value.status_code, think.value.error) == (
        400,
        '"gemma2" does not support thinking',
    )
    with pytest.raises(ollama.ResponseError) as level:
        client.chat(model="gemma2", messages=HI, think="high")
    assert level.value.status_code == 400
    assert client.chat(model="gemma2", messages=HI, think=False).message.content
    with pytest.raises(ollama.ResponseError) as embed_only:
        client.chat(model="nomic-embed-text", messages=HI)
    assert embed_only.value.status_code == 400
    assert "does not support chat" in embed_only.value.error


# --- thinking and loading -----------------------------------------------------------------


def test_thinking_model_thinks_unless_told_not_to(standin, client):
    standin.script(Reply(thinking="hmm", content="ok"), Reply(thinking="hmm", content="ok"))
    default = client.chat(model="qwen3", messages=HI)
    assert default.message.thinking == "hmm" and default.message.content == "ok"
    off = client.chat(model="qwen3", messages=HI, think=False)
    assert off.message.thinking is None and off.message.content == "ok"
    assert "think" not in standin.chat_requests()[0]


def test_empty_messages_only_load_the_model(standin, client):
    standin.script(Reply(content="not used"))
    loaded = client.chat(model="llama3.2", messages=[])
    assert loaded.done and loaded.done_reason == "load" and loaded.message.content == ""
    assert [m.model for m in client.ps().models] == ["llama3.2:latest"]
    unloaded = client.chat(model="llama3.2", messages=[], keep_alive=0)
    assert unloaded.done_reason == "unload" and client.ps().models == []
    assert standin.pending_replies == 1


# --- embeddings ---------------------------------------------------------------------------


def test_embed_vectors_are_normalised_ordered_and_similar_for_shared_words(standin, client):
    texts = ["The cat sat on the mat", "a cat sat on a mat", "Quantum chromodynamics lecture"]
    vecs = client.embed(model="nomic-embed-text", input=texts).embeddings
    assert len(vecs) == 3 and all(len(v) == 768 for v in vecs)
    assert all(math.isclose(_dot(v, v), 1.0, rel_tol=1e-9) for v in vecs)
    assert _dot(vecs[0], vecs[1]) > _dot(vecs[0], vecs[2]) + 0.3
    single = client.embed(model="nomic-embed-text", input="a cat sat on a mat").embeddings
    assert single == [vecs[1]]  # deterministic and order-preserving
    assert vecs == hashed_embeddings(texts, 768, max_tokens=2048)  # same in any process
    assert (standin.embed_calls, standin.embed_inputs) == (2, 4)


def test_embed_empty_input_and_dimensions(standin, client):
    assert client.embed(model="all-minilm", input=[]).embeddings == []
    assert client.embed(model="all-minilm", input="").embeddings == []
    short = client.embed(model="all-minilm", input=["x y z"], dimensions=16).embeddings[0]
    assert len(short) == 16 and math.isclose(_dot(short, short), 1.0)
    assert len(client.embed(model="all-minilm", input="x").embeddings[0]) == 384


def test_embedder_is_pluggable_and_failures_can_be_injected(standin, client):
    standin.set_embedder("all-minilm", lambda texts: [[float(len(t)), 0.0] for t in texts])
    assert client.embed(model="all-minilm", input=["abc", "de"]).embeddings == [
        [3.0, 0.0],
        [2.0, 0.0],
    ]
    standin.fail_embeds(1)
    with pytest.raises(ollama.ResponseError) as busy:
        client.embed(model="all-minilm", input=["abc"])
    assert busy.value.status_code == 503
    assert client.embed(model="all-minilm", input=["abc"]).embeddings == [[3.0, 0.0]]
    assert (standin.embed_calls, standin.embed_inputs) == (3, 4)


def test_failing_embedder_is_a_500(standin, client):
    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model file corrupt")

    standin.set_embedder("nomic-embed-text", broken)
    with pytest.raises(ollama.ResponseError) as info:
        client.embed(model="nomic-embed-text", input="x")
    assert info.value.status_code == 500 and "model file corrupt" in info.value.error


def test_embed_too_long_without_truncation_is_400(standin, client):
    standin.add_model("tiny-embed", capabilities=("embedding",), context_length=4)
    with pytest.raises(ollama.ResponseError) as info:
        client.embed(model="tiny-embed", input="one two three four five", truncate=False)
    assert info.value.status_code == 400
    assert len(client.embed(model="tiny-embed", input="one two three four five").embeddings) == 1


# --- catalogue endpoints ------------------------------------------------------------------


def test_list_show_and_ps_validate_through_the_client(standin, client):
    names = [m.model for m in client.list().models]
    assert names == [
        "llama3.2:latest",
        "qwen3:latest",
        "gemma2:latest",
        "nomic-embed-text:latest",
        "all-minilm:latest",
    ]
    shown = client.show("qwen3")
    assert shown.modelinfo["qwen3.context_length"] == 40960
    assert shown.capabilities == ["completion", "tools", "thinking"]
    assert shown.details.family == "qwen3" and shown.template and shown.modelfile
    assert shown.parameters and shown.modified_at is not None
    assert client.ps().models == []
    client.chat(model="qwen3", messages=HI, options={"num_ctx": 8192})
    (running,) = client.ps().models
    assert running.model == "qwen3:latest" and running.context_length == 8192
    assert running.expires_at is not None and running.size_vram == running.size


def test_add_model_replaces_the_default_catalogue(standin, client):
    standin.add_model("tiny", capabilities=("completion", "tools"), context_length=1024)
    assert [m.model for m in client.list().models] == ["tiny:latest"]
    assert client.show("tiny").modelinfo["llama.context_length"] == 1024
    with pytest.raises(ollama.ResponseError):
        client.chat(model="llama3.2", messages=HI)


def test_pull_streams_progress_and_installs(standin, client):
    standin.add_model("llama3.2")
    standin.add_model("phi4", installed=False)
    with pytest.raises(ollama.ResponseError):
        client.chat(model="phi4", messages=HI)
    statuses = list(client.pull("phi4", stream=True))
    assert statuses[0].status == "pulling manifest"
    assert statuses[-1].status == "success"
    layer = [s for s in statuses if s.digest]
    assert layer[0].total == 4_700_000_000 and layer[0].digest.startswith("sha256:")
    assert any(s.completed == s.total for s in layer)
    assert "phi4:latest" in [m.model for m in client.list().models]
    assert client.pull("llama3.2").status == "success"


def test_pull_unknown_model_streams_an_error(standin, client):
    with pytest.raises(ollama.ResponseError) as streamed:
        list(client.pull("nope", stream=True))
    assert streamed.value.error == "pull model manifest: file does not exist"
    assert streamed.value.status_code == -1
    with pytest.raises(ollama.ResponseError) as whole:
        client.pull("nope")
    assert whole.value.status_code == 500


def test_version_root_and_unknown_path(standin):
    assert httpx.get(f"{standin.url}/api/version").json() == {"version": "0.12.10"}
    root = httpx.get(standin.url)
    assert root.status_code == 200 and root.text == "Ollama is running"
    assert httpx.get(f"{standin.url}/api/nope").status_code == 404


def test_client_finds_the_standin_through_ollama_host(standin):
    assert os.environ["OLLAMA_HOST"] == standin.url
    assert ollama.Client().chat(model="llama3.2", messages=HI).message.content


def test_isolated_env_points_everything_at_tmp(isolated_env: Path):
    for var in ("LOCALGPT_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        assert Path(os.environ[var]).is_dir()
        assert Path(os.environ[var]).is_relative_to(isolated_env)
    with pytest.raises(ConnectionError):  # no server: refused, never a real Ollama
        ollama.Client().list()


# --- disconnects and wire format ----------------------------------------------------------


def test_closing_the_stream_early_counts_a_disconnect(standin, client):
    standin.script(Reply(content=[f"w{i} " for i in range(50)], delay=0.02))
    stream = client.chat(model="llama3.2", messages=HI, stream=True)
    with contextlib.closing(stream):
        assert next(stream).message.content == "w0 "
    assert standin.wait_for_disconnects(1, timeout=3)
    assert standin.disconnects == 1
    # the stand-in is still healthy after the cut
    assert client.chat(model="llama3.2", messages=HI).message.content


def test_chat_stream_is_chunked_ndjson_without_blank_lines(standin):
    standin.script(Reply(thinking="t", content="a <b> & c", tool_calls=[{"name": "f"}]))
    body = json.dumps({"model": "qwen3", "messages": HI}).encode()
    raw = _raw_http(
        standin.url,
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
    )
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    headers = head.lower()
    assert b"content-type: application/x-ndjson" in headers
    assert b"transfer-encoding: chunked" in headers and b"content-length" not in headers
    chunks, terminated = _dechunk(payload)
    assert terminated
    text = b"".join(chunks)
    assert text.endswith(b"\n") and b"\n\n" not in text and not text.startswith(b"\n")
    objs = [json.loads(line) for line in text.split(b"\n")[:-1]]
    assert all(chunk.count(b"\n") == 1 for chunk in chunks)  # one line per chunk, as Ollama
    assert [o["done"] for o in objs] == [False] * (len(objs) - 1) + [True]
    assert "".join(o["message"]["content"] for o in objs) == "a <b> & c"
    assert b'"content":"\\u003cb\\u003e "' in text and b"\\u0026" in text  # as Go escapes


def test_non_stream_replies_have_content_length(standin):
    body = json.dumps({"model": "llama3.2", "messages": HI, "stream": False}).encode()
    raw = _raw_http(
        standin.url,
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
    )
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert b"content-type: application/json; charset=utf-8" in head.lower()
    assert f"content-length: {len(payload)}".encode() in head.lower()
    assert json.loads(payload)["message"]["content"] == "Hello from llama3.2."


def test_bad_request_bodies(standin):
    assert httpx.post(f"{standin.url}/api/chat", content=b"{nope").status_code == 400
    missing = httpx.post(f"{standin.url}/api/chat", json={"messages": HI})
    assert (missing.status_code, missing.json()) == (400, {"error": "model is required"})


def test_normalize_name():
    assert normalize_name("llama3.2") == "llama3.2:latest"
    assert normalize_name("qwen3:8b") == "qwen3:8b"
    assert normalize_name("registry.ollama.ai/library/gemma2") == "gemma2:latest"
    assert normalize_name("host:5000/ns/model") == "host:5000/ns/model:latest"


# --- process mode -------------------------------------------------------------------------


def test_runs_as_a_process_streaming_n_tokens():
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.standin", "--port", "0", "--tokens", "500"],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        parts = list(ollama.Client(host=url).chat(model="llama3.2", messages=HI, stream=True))
        assert len(parts) == 501 and {p.message.content for p in parts[:-1]} == {"tok "}
        assert parts[-1].eval_count == 500
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0


def test_offered_only_parses_calls_to_offered_tools_only_as_ollama_does(standin, client):
    """Ollama's parser knows the request's tools: a call to another name stays text. The
    preview tools' arguments (a diff with newlines, a command with `&&` and `>`) travel
    Go-escaped and arrive intact."""
    diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a <b>\n+a & b\n"
    command = "make && ./run > out.txt"
    edit = {"name": "propose_edit", "arguments": {"path": "f", "diff": diff}}
    run = {"name": "propose_command", "arguments": {"command": command}}
    offered = [{"type": "function", "function": {"name": "propose_edit", "description": "",
                                                  "parameters": {"type": "object"}}}]
    standin.script(Reply(tool_calls=[edit, run], offered_only=True))
    body = {"model": "llama3.2", "messages": HI, "tools": offered, "stream": True}
    with httpx.stream("POST", f"{standin.url}/api/chat", json=body) as response:
        raw = response.read()
    assert b"\\u0026" in raw and b"\\u003e" in raw  # Go's encoder escapes & and >
    standin.script(Reply(tool_calls=[edit, run], offered_only=True))
    parts = list(client.chat(model="llama3.2", messages=HI, tools=offered, stream=True))
    calls = [c for p in parts for c in (p.message.tool_calls or [])]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("propose_edit", {"path": "f", "diff": diff})]
    text = "".join(p.message.content or "" for p in parts)
    assert '"name": "propose_command"' in text and command in text
