"""A model server that misbehaves on the wire, for the fault tests of the HTTP providers
(tests/test_faults_wire.py): it speaks just enough of Ollama's and the OpenAI wire to be
chosen (a model list, /api/show), then answers a chat or embeddings request as `mode`
says: never (`silent`), with SSE comments or empty NDJSON chunks for ever (`keepalive`),
with two tokens and then keep-alives for ever (`stall`), or with a token and the first
half of an event before it closes the connection (`cut_event`).

Raw sockets rather than http.server, so the bytes are exactly the misbehaviour: a
keep-alive every `every` seconds, a cut in the middle of a line. Every wait is bounded
(`LIFETIME`), so a client that never gives up cannot keep the test's thread alive.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

LIFETIME = 120.0  # seconds a misbehaving answer goes on at most
MODEL = "some-model"
SHOW = {"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "llama", "parameter_size": "1B",
                    "quantization_level": "Q4_0"},
        "model_info": {"llama.context_length": 4096},
        "capabilities": ["completion", "tools"]}  # fmt: skip


def _sse(delta: dict[str, Any]) -> bytes:
    event = {"id": "x", "object": "chat.completion.chunk", "model": MODEL,
             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _ndjson(content: str) -> bytes:
    chunk = {"model": MODEL, "created_at": "2025-01-01T00:00:00Z",
             "message": {"role": "assistant", "content": content}, "done": False}  # fmt: skip
    return json.dumps(chunk).encode() + b"\n"


class Misbehaving:
    """A threaded server on 127.0.0.1; `url` for Ollama, `url + "/v1"` for the OpenAI wire."""

    def __init__(self, mode: str, every: float = 1.0) -> None:
        self.mode = mode
        self.every = every
        self.requests: list[str] = []  # "METHOD path" of each request
        self.stopped = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __enter__(self) -> Misbehaving:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while not self.stopped.is_set() and self._one(conn):
                    pass
            except OSError:
                pass  # the client gave up: that is what the tests wait for

    def _one(self, conn: socket.socket) -> bool:
        """Answer one request; False when the connection is done."""
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65536)
            if not data:
                return False
            head += data
        top, _, body = head.partition(b"\r\n\r\n")
        lines = top.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                       if k.strip().lower() == "content-length"), 0)  # fmt: skip
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(f"{method} {path}")
        if path in ("/v1/models", "/api/tags"):
            key = "data" if path == "/v1/models" else "models"
            self._json(conn, {key: [{"id": MODEL, "name": MODEL, "model": MODEL}]})
            return True
        if path == "/api/show":
            self._json(conn, SHOW)
            return True
        self._misbehave(conn, path)
        return False

    def _json(self, conn: socket.socket, body: Any) -> None:
        data = json.dumps(body).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)  # fmt: skip

    def _misbehave(self, conn: socket.socket, path: str) -> None:
        sse = path.startswith("/v1/")
        if self.mode == "silent" or "embed" in path:
            self.stopped.wait(LIFETIME)  # accepted, read, never answered
            return
        kind = "text/event-stream" if sse else "application/x-ndjson"
        # No Content-Length and no chunking: the body ends when the connection does.
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n"
                     .encode())  # fmt: skip
        token = _sse({"content": "Partial "}) if sse else _ndjson("Partial ")
        if self.mode in ("stall", "cut_event"):
            conn.sendall(token + (_sse({"content": "answer"}) if sse else _ndjson("answer")))
        if self.mode == "cut_event":
            half = _sse({"content": " never finished"}) if sse else _ndjson(" never finished")
            conn.sendall(half[: len(half) // 2])
            time.sleep(0.2)
            return  # closed mid-event
        keepalive = b": keep-alive\n\n" if sse else _ndjson("")
        end = time.monotonic() + LIFETIME
        while time.monotonic() < end and not self.stopped.wait(self.every):
            conn.sendall(keepalive)
