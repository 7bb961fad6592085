"""A stand-in OpenAI-compatible server (the `/v1` wire of vLLM, llama.cpp, LM Studio, OpenAI).

Like tests/standin.py for Ollama, a real HTTP server rather than a mock of a client: the
bugs live in the wire format (SSE framing, tool-call arguments split across deltas by
`index`, a missing `[DONE]`, a connection cut mid-stream, 429 with Retry-After), so the CLI
is tested through its real HTTP client talking to something that speaks the wire byte for
byte. Tests script each answer with `Answer`; `GET /v1/models` lists `models`.

Run as a process for benchmarks (answers every request with N "tok " tokens):
    python -m tests.openai_standin --tokens N [--delay S] [--port P] [--key K]
prints its base URL on the first stdout line and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.standin import seen_reply


@dataclass
class ToolCall:
    """One tool call; `arguments` is the raw JSON string, sent in `pieces` deltas."""

    name: str
    arguments: str
    pieces: int = 4


@dataclass
class Answer:
    """What one POST /v1/chat/completions answers.

    `content`/`reasoning`: strings split into word-sized deltas (`reasoning` goes out as
    `reasoning_content` first). `tool_calls`: sent after the content, interleaved by
    `index`. `status`: an HTTP error instead of a stream (with `retry_after` for 429).
    `cut_after=N`: N content deltas, then the connection is closed without a final chunk.
    `error_after=N`: N content deltas, then an error event (as vLLM sends on a server
    failure mid-answer) and `[DONE]`. `no_done`: the stream ends after the final chunk
    with no `data: [DONE]`.
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    status: int = 200
    retry_after: str | None = None
    cut_after: int | None = None
    error_after: int | None = None  # N content deltas, then a `data: {"error": …}` event
    no_done: bool = False
    delay: float = 0.0  # seconds before each content delta (a model that takes its time)
    usage: tuple[int, int] = (11, 7)  # prompt, completion


def _images(messages: list[Any]) -> list[bytes]:
    """The pictures of every message's `image_url` parts (`data:` URLs), decoded."""
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if url.startswith("data:") and ";base64," in url:
                out.append(base64.b64decode(url.split(";base64,", 1)[1]))
    return out


def _words(text: str) -> list[str]:
    out: list[str] = []
    for word in text.split(" "):
        if out:
            out[-1] += " "
        out.append(word)
    return [w for w in out if w]


def _split(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class OpenAIStandIn:
    """A threaded server on 127.0.0.1; `url` is the base URL (with `/v1`)."""

    def __init__(self, models: tuple[str, ...] = ("some-model",), key: str | None = None,
                 port: int = 0):  # fmt: skip
        self.port = port
        self.models = list(models)
        self.key = key  # when set, requests without `Authorization: Bearer key` get 401
        self.answers: list[Answer] = []
        # POST /v1/rerank: each document's share of the query's words (4+ letters), as a
        # probability (Jina, Cohere) or, with `rerank_logits`, a logit (llama.cpp);
        # `rerank_reply` replaces the whole reply (malformed replies for the tests).
        self.rerank_logits = False
        self.rerank_reply: Any = None
        # As vLLM started without --enable-auto-tool-choice: a request offering tools is
        # refused with HTTP 400 naming them.
        self.refuse_tools = False
        self.vision: set[str] = set()  # models that take `image_url` parts (others: 400)
        # The `response_format` types the server accepts; a request with another is refused
        # with HTTP 400 naming it (llama-server before json_schema, LM Studio without
        # json_object). An unscripted json_schema request is answered with an instance of
        # its schema (tests/standin_format.py), as constrained decoding would.
        self.formats: tuple[str, ...] = ("json_schema", "json_object")
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def script(self, *answers: Answer) -> None:
        with self.lock:
            self.answers.extend(answers)

    default = Answer(content="Hello there.")  # what an unscripted request gets

    def next_answer(self, images: list[bytes] | None = None) -> Answer:
        """The next scripted answer; else, to pictures, what it sees (tests/standin.py's
        seen_reply: each one's size and sha256); else `default`."""
        with self.lock:
            if self.answers:
                return self.answers.pop(0)
        return Answer(content=seen_reply(images)) if images else self.default

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> OpenAIStandIn:
        handler = type("Handler", (_Handler,), {"standin": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> OpenAIStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    standin: OpenAIStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str, **headers: str) -> None:
        body = {"error": {"message": message, "type": kind, "code": None}}
        self._json(status, body, {k.replace("_", "-"): v for k, v in headers.items()})

    def _authorized(self) -> bool:
        key = self.standin.key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Incorrect API key provided.", "invalid_request_error")
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, f"no route {self.path}", "not_found")
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "standin"}
                for m in self.standin.models]  # fmt: skip
        self._json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with self.standin.lock:
            self.standin.requests.append({"path": self.path, "body": body})
        if not self._authorized():
            return
        if self.path == "/v1/embeddings":
            return self._embeddings(body)
        if self.path == "/v1/rerank":
            return self._rerank(body)
        if self.path != "/v1/chat/completions":
            return self._error(404, f"no route {self.path}", "not_found")
        if body.get("model") not in self.standin.models:
            msg = f"The model `{body.get('model')}` does not exist."
            return self._error(404, msg, "invalid_request_error")
        if self.standin.refuse_tools and body.get("tools"):
            msg = ('"auto" tool choice requires --enable-auto-tool-choice and '
                   "--tool-call-parser to be set")
            return self._error(400, msg, "BadRequestError")
        images = _images(body.get("messages") or [])
        if images and body.get("model") not in self.standin.vision:
            msg = f"{body.get('model')} is not a multimodal model"  # as vLLM says
            return self._error(400, msg, "BadRequestError")
        kind = (body.get("response_format") or {}).get("type")
        if kind is not None and kind not in self.standin.formats:
            msg = f"response_format type {kind!r} is not supported"
            return self._error(400, msg, "invalid_request_error")
        answer = self.standin.next_answer(images)
        if kind == "json_schema" and answer is self.standin.default:
            from tests.standin_format import instance, latest_question

            schema = body["response_format"]["json_schema"]["schema"]
            answer = Answer(content=json.dumps(instance(schema, latest_question(body))))
        if answer.status != 200:
            extra = {"Retry_After": answer.retry_after} if answer.retry_after else {}
            return self._error(answer.status, f"HTTP {answer.status}", "server_error", **extra)
        if body.get("stream"):
            self._stream(body, answer)
        else:
            self._whole(body, answer)

    def _embeddings(self, body: dict[str, Any]) -> None:
        if body.get("model") not in self.standin.models:
            msg = f"The model `{body.get('model')}` does not exist."
            return self._error(404, msg, "invalid_request_error")
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                for i, t in enumerate(inputs)]  # fmt: skip
        self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                         "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})

    def _rerank(self, body: dict[str, Any]) -> None:
        if body.get("model") not in self.standin.models:
            msg = f"The model `{body.get('model')}` does not exist."
            return self._error(404, msg, "invalid_request_error")
        if self.standin.rerank_reply is not None:
            return self._json(200, self.standin.rerank_reply)
        words = set(re.findall(r"[a-z]{4,}", str(body.get("query")).lower()))
        results = []
        for i, doc in enumerate(body.get("documents") or []):
            share = len(words & set(re.findall(r"[a-z]{4,}", str(doc).lower())))
            score = share / len(words) if words else 0.0
            results.append({"index": i, "relevance_score":
                            score * 12 - 6 if self.standin.rerank_logits else score})
        results.sort(key=lambda r: -r["relevance_score"])  # servers answer best first
        top = int(body.get("top_n") or len(results))
        self._json(200, {"model": body.get("model"), "object": "list",
                         "results": results[:top],
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})  # fmt: skip

    def _base(self, body: dict[str, Any], obj: str) -> dict[str, Any]:
        return {"id": "chatcmpl-standin", "object": obj, "created": int(time.time()),
                "model": body.get("model")}  # fmt: skip

    def _whole(self, body: dict[str, Any], answer: Answer) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": answer.content or None}
        if answer.reasoning:
            message["reasoning_content"] = answer.reasoning
        if answer.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for i, c in enumerate(answer.tool_calls)
            ]  # fmt: skip
        reason = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
        out = self._base(body, "chat.completion")
        out["choices"] = [{"index": 0, "message": message, "finish_reason": reason}]
        p, c = answer.usage
        out["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        self._json(200, out)

    def _send(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, body: dict[str, Any], delta: dict[str, Any], **extra: Any) -> None:
        chunk = self._base(body, "chat.completion.chunk")
        chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
        chunk.update(extra)
        self._send(b"data: " + json.dumps(chunk).encode() + b"\n\n")

    def _stream(self, body: dict[str, Any], answer: Answer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._event(body, {"role": "assistant", "content": ""})
        for piece in _words(answer.reasoning):
            self._event(body, {"reasoning_content": piece})
        for n, piece in enumerate(_words(answer.content)):
            if answer.cut_after is not None and n >= answer.cut_after:
                self.close_connection = True
                self.wfile.flush()
                return  # no terminating chunk: the client sees the connection end
            if answer.error_after is not None and n >= answer.error_after:
                error = {"error": {"message": "CUDA out of memory", "type": "server_error",
                                   "code": 500}}  # fmt: skip
                self._send(b"data: " + json.dumps(error).encode() + b"\n\n")
                self._send(b"data: [DONE]\n\n")
                self._send(b"")
                return
            time.sleep(answer.delay)
            self._event(body, {"content": piece})
        self._tool_deltas(body, answer.tool_calls)
        reason = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
        final = self._base(body, "chat.completion.chunk")
        final["choices"] = [{"index": 0, "delta": {}, "finish_reason": reason}]
        self._send(b"data: " + json.dumps(final).encode() + b"\n\n")
        if (body.get("stream_options") or {}).get("include_usage"):
            p, c = answer.usage
            usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
            chunk = self._base(body, "chat.completion.chunk") | {"choices": [], "usage": usage}
            self._send(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if not answer.no_done:
            self._send(b"data: [DONE]\n\n")
        self._send(b"")

    def _tool_deltas(self, body: dict[str, Any], calls: list[ToolCall]) -> None:
        """Each call's header, then its arguments in pieces, interleaved across calls."""
        pieces = [_split(c.arguments, c.pieces) for c in calls]
        for i, c in enumerate(calls):
            head = {"index": i, "id": f"call_{i}", "type": "function",
                    "function": {"name": c.name, "arguments": ""}}  # fmt: skip
            self._event(body, {"tool_calls": [head]})
        for step in range(max((len(p) for p in pieces), default=0)):
            for i, parts in enumerate(pieces):
                if step < len(parts):
                    delta = {"index": i, "function": {"arguments": parts[step]}}
                    self._event(body, {"tool_calls": [delta]})


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-wire stand-in server")
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each token")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--key", help="API key a request must carry (else HTTP 401)")
    args = parser.parse_args()
    server = OpenAIStandIn(key=args.key, port=args.port)
    server.default = Answer(content="tok " * args.tokens, delay=args.delay)
    server.start()
    print(server.url, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()


if __name__ == "__main__":
    main()
