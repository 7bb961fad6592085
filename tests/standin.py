"""A stand-in Ollama server for tests and benchmarks.

Why a real HTTP server rather than a mock of the `ollama` client: the bugs that matter live
in the seam between the client and the server (chunked NDJSON, an error line in the middle
of a stream, a dropped connection, pydantic validation of every reply), so the CLI must be
tested through the real client talking to something that speaks Ollama's wire format byte
for byte. Tests script what the "model" says with `Reply`; everything else (catalogue, error
texts, status codes, durations) behaves like Ollama 0.12.

Run as a process for end-to-end tests and benchmarks:
    python -m tests.standin --port 0 [--tokens N] [--chunk-text "tok "]
prints its URL on the first stdout line and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.standin_format import INVALID_FORMAT, structured_content, valid_format

VERSION = "0.12.10"
RUNTIME_ERROR = "an error was encountered while running the model"
BUSY_ERROR = "server busy, please try again.  maximum pending requests exceeded"
PULL_UNKNOWN_ERROR = "pull model manifest: file does not exist"
NO_VISION_ERROR = "vision model not found"
REGISTRY_PREFIX = "registry.ollama.ai/library/"
WRITE_BATCH = 64 * 1024  # bytes of chunk frames gathered per socket write on fast streams
DEFAULT_NUM_CTX = 4096  # what Ollama loads a model with when the request sets no num_ctx
DEFAULT_KEEP_ALIVE = 300.0
DISCONNECT_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

Embedder = Callable[[list[str]], list[list[float]]]

_WORD = re.compile(r"\w+")
_PIECE = re.compile(r"\s*\S+\s*|\s+")
_DURATION_PART = re.compile(r"(-?\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
# Go's encoding/json escapes these inside strings; they never occur outside strings in JSON.
_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


@dataclass
class Recorded:
    """One request as the server saw it; `body` is parsed JSON, or None when absent/invalid."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]  # keys lower-cased


@dataclass
class Reply:
    """What the model answers to one /api/chat call.

    `content`/`thinking`: a plain string is split into word-sized chunks (whitespace kept
    with the word before it); a list is sent chunk for chunk, so tests control exactly what
    the client sees. Thinking goes first, and only to a model with the `thinking`
    capability when the request did not say `think: false` (as a real model would).
    `tool_calls`: `{"name", "arguments"}` (or Ollama's `{"function": {...}}`), all in one
    chunk after the content, or on the done chunk with `tool_calls_on_done`.
    `delay`: seconds between chunks. `error_after=N`: N chunks, then the mid-stream error
    line (N = number of chunks replaces the done chunk). `drop_after=N`: N chunks, then the
    socket closes without the terminating chunk. With `stream: false` these become a wait,
    a 500, and a connection closed without a response. `http_status`: answer that status
    with `{"error": http_error}` instead. `eval_count=None` counts the content chunks.
    `offered_only`: as Ollama's tool parser, which knows only the tools the request sent,
    a call to a tool the request did not offer is not a tool call: its JSON text arrives
    as content (so a test proves the client offered the tool it scripts a call to).
    """

    content: str | list[str] = ""
    thinking: str | list[str] = ""
    tool_calls: Sequence[dict[str, Any]] = ()
    tool_calls_on_done: bool = False
    done_reason: str = "stop"
    delay: float = 0.0
    error_after: int | None = None
    drop_after: int | None = None
    http_status: int | None = None
    http_error: str = ""
    prompt_eval_count: int = 26
    eval_count: int | None = None
    offered_only: bool = False


@dataclass
class ModelSpec:
    """A model in the stand-in's catalogue; `installed=False` means pullable but not local."""

    name: str
    capabilities: tuple[str, ...]
    context_length: int
    family: str
    parameter_size: str
    quantization: str
    size: int
    embedding_dim: int | None
    installed: bool
    modified_at: datetime

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()

    @property
    def embedding_length(self) -> int:
        """Generative models embed too (Ollama requires no capability for /api/embed)."""
        return self.embedding_dim or 4096

    def details(self) -> dict[str, Any]:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization,
        }


def normalize_name(name: str) -> str:
    """`llama3.2` and `registry.ollama.ai/library/llama3.2` both mean `llama3.2:latest`."""
    name = name.strip()
    if name.startswith(REGISTRY_PREFIX):
        name = name[len(REGISTRY_PREFIX) :]
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def split_pieces(text: str | list[str]) -> list[str]:
    """Word-sized chunks that join back to exactly `text`; a list is taken as given."""
    if isinstance(text, str):
        return _PIECE.findall(text)
    return list(text)


def hashed_embeddings(
    texts: list[str], dim: int, max_tokens: int | None = None
) -> list[list[float]]:
    """Deterministic bag-of-words vectors: texts sharing words land near each other.

    blake2b, not hash(): Python salts str hashes per process, and tests compare vectors
    across processes (an index built by one run, queried by the next).
    """
    vectors = []
    for text in texts:
        tokens = _WORD.findall(text.lower())[:max_tokens] or [text]
        vec = [0.0] * dim
        for token in tokens:
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            vec[h % dim] += -1.0 if h >> 63 else 1.0
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:  # signed collisions cancelled out: fall back to a unit basis vector
            h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vec[h % dim], norm = 1.0, 1.0
        vectors.append([v / norm for v in vec])
    return vectors


def _l2_normalize(vec: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def _dumps(obj: Any) -> bytes:
    return (
        json.dumps(obj, ensure_ascii=False, separators=(",", ":")).translate(_GO_ESCAPES).encode()
    )


def _frame(line: bytes) -> bytes:
    """One HTTP chunk carrying one NDJSON line, as Ollama flushes one line per chunk."""
    return b"%x\r\n%s\r\n" % (len(line), line)


_LAST_CHUNK = b"0\r\n\r\n"


def _rfc3339(when: datetime | None = None) -> str:
    """Go's RFC3339Nano in UTC: nanoseconds with trailing zeros trimmed, `Z` suffix."""
    if when is None:
        ns = time.time_ns()
        secs, frac = divmod(ns, 1_000_000_000)
        base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    else:
        utc = when.astimezone(timezone.utc)
        base, frac = utc.strftime("%Y-%m-%dT%H:%M:%S"), utc.microsecond * 1000
    digits = f"{frac:09d}".rstrip("0")
    return f"{base}.{digits}Z" if digits else f"{base}Z"


def _parse_keep_alive(value: Any) -> float | None:
    """Seconds to keep a model loaded; negative means forever; None when unparseable/absent."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
        parts = _DURATION_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(float(n) * units[u] for n, u in parts)
    return None


def _wire_tool_calls(calls: Sequence[dict[str, Any]], ids: Callable[[], str]) -> list[dict]:
    """Accept `{"name", "arguments"}` or `{"function": {...}}` and emit Ollama's shape."""
    wired = []
    for index, call in enumerate(calls):
        fn = call.get("function", call)
        wired.append(
            {
                "id": call.get("id") or ids(),
                "function": {
                    "index": index,
                    "name": fn["name"],
                    "arguments": dict(fn.get("arguments") or {}),
                },
            }
        )
    return wired


class _Encoder:
    """Builds chat chunk frames; identical chunks are encoded once (the benchmark path)."""

    def __init__(self, model: str) -> None:
        self._model = _dumps(model)
        self.refresh()

    def refresh(self) -> None:
        """New `created_at` for the chunks to come: slow streams get a time per chunk."""
        self._head = b'{"model":' + self._model + b',"created_at":' + _dumps(_rfc3339())
        self._memo: dict[tuple[str, str], bytes] = {}

    def line(self, message: dict[str, Any], tail: dict[str, Any]) -> bytes:
        body = _dumps(tail)  # '{"done":...}' -> splice after the message
        return self._head + b',"message":' + _dumps(message) + b"," + body[1:] + b"\n"

    def piece(self, kind: str, text: str) -> bytes:
        key = (kind, text)
        frame = self._memo.get(key)
        if frame is None:
            message = {"role": "assistant", "content": text}
            if kind == "thinking":
                message = {"role": "assistant", "content": "", "thinking": text}
            frame = self._memo[key] = _frame(self.line(message, {"done": False}))
        return frame


class StandIn:
    """The stand-in server plus the scripting API tests use to decide what it answers.

    Observed state: `requests` (every request), `disconnects` (streams the client cut),
    `embed_calls`/`embed_inputs` (every /api/embed request and its inputs, including
    failed ones), `errors` (tracebacks of stand-in bugs). Until the first `add_model`, the
    catalogue holds llama3.2 (tools), qwen3 (tools, thinking), gemma2 (no tools),
    nomic-embed-text (768) and all-minilm (384). `tokens=N` makes every unscripted chat
    reply N chunks of `chunk_text` (the streaming benchmark).
    """

    def __init__(
        self, *, port: int = 0, tokens: int | None = None, chunk_text: str = "tok ",
        delay: float = 0.0,
    ) -> None:
        self.port = port
        self._delay = delay  # seconds between the chunks of a --tokens reply
        self.url = ""
        self.requests: list[Recorded] = []
        self.disconnects = 0
        self.embed_calls = 0
        self.embed_inputs = 0
        self.errors: list[str] = []  # tracebacks of stand-in bugs, so tests can surface them
        self._tokens = tokens
        self._chunk_text = chunk_text
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._models: dict[str, ModelSpec] = {}
        self._defaults_in_place = True
        self._queues: dict[str | None, deque[Reply]] = {}
        self._format_queue: deque[Reply] = deque()
        self.format_mode = "valid"  # how unscripted format requests are answered
        self.format_delay = 5.0  # seconds format_mode "timeout" waits before answering
        # seconds each /api/embed request waits before answering, as a GPU server's batch
        # takes: requests in flight at once wait side by side (one thread each)
        self.embed_delay = 0.0
        self.embeds_at_once = 0  # the most /api/embed requests seen in progress together
        self._embeds_now = 0
        self._embedders: dict[str, Embedder] = {}
        self._embed_failures: deque[int] = deque()
        self._loaded: dict[str, tuple[datetime, int]] = {}
        self._call_counter = 0
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._custom_embed_lock = threading.Lock()
        for spec in _DEFAULT_MODELS:
            self._put_model(*spec)

    # --- scripting -------------------------------------------------------------------

    def add_model(
        self,
        name: str,
        *,
        capabilities: Sequence[str] = ("completion",),
        context_length: int = 8192,
        family: str = "llama",
        parameter_size: str = "8.0B",
        quantization: str = "Q4_K_M",
        size: int = 4_700_000_000,
        embedding_dim: int | None = None,
        installed: bool = True,
    ) -> None:
        """Add a model; the first call replaces the default catalogue, so tests see exactly
        the models they added. `installed=False` makes it pullable but not yet local."""
        with self._lock:
            if self._defaults_in_place:
                self._models.clear()
                self._defaults_in_place = False
        if "embedding" in capabilities and embedding_dim is None:
            embedding_dim = 768
        self._put_model(
            name,
            tuple(capabilities),
            context_length,
            family,
            parameter_size,
            quantization,
            size,
            embedding_dim,
            installed,
        )

    def _put_model(
        self,
        name: str,
        capabilities: tuple[str, ...],
        context_length: int,
        family: str,
        parameter_size: str,
        quantization: str,
        size: int,
        embedding_dim: int | None,
        installed: bool = True,
    ) -> None:
        spec = ModelSpec(
            normalize_name(name),
            capabilities,
            context_length,
            family,
            parameter_size,
            quantization,
            size,
            embedding_dim,
            installed,
            datetime.now(timezone.utc),
        )
        with self._lock:
            self._models[spec.name] = spec

    def add_sloppy(self) -> None:
        """Install `sloppy` beside the default models: a model whose server has no
        constrained decoding, so it answers prose even when `format` asks for JSON (its
        scripted replies, `script(..., model="sloppy")`, are what it says instead)."""
        self._put_model(SLOPPY, ("completion",), 8192, "llama", "1.0B", "Q4_0",
                        700_000_000, None, True)  # fmt: skip

    def script(self, *replies: Reply, model: str | None = None) -> None:
        """Queue replies for the next /api/chat generations (FIFO), for one model or any."""
        for reply in replies:
            _check_reply(reply)
        key = normalize_name(model) if model else None
        with self._lock:
            self._queues.setdefault(key, deque()).extend(replies)

    def script_format(self, *replies: Reply) -> None:
        """Queue replies for the next requests that set `format` (FIFO), apart from the
        answers `script` queues: a turn's stage calls and its answer interleave."""
        for reply in replies:
            _check_reply(reply)
        with self._lock:
            self._format_queue.extend(replies)

    def format_requests(self) -> list[dict]:
        """Bodies of /api/chat requests that set `format` (the pipeline's stage calls)."""
        return [b for b in self.chat_requests() if isinstance(b, dict) and b.get("format")]

    @property
    def pending_replies(self) -> int:
        """Scripted replies not yet consumed: a test can assert its script was used up."""
        with self._lock:
            return sum(len(q) for q in self._queues.values()) + len(self._format_queue)

    def chat_requests(self) -> list[dict]:
        """Bodies of /api/chat requests, in arrival order."""
        with self._lock:
            return [r.body for r in self.requests if r.path == "/api/chat"]

    def set_embedder(self, model: str, fn: Embedder) -> None:
        """Use `fn(texts) -> vectors` for `model` instead of the hashed bag of words."""
        with self._lock:
            self._embedders[normalize_name(model)] = fn

    def fail_embeds(self, n: int, status: int = 503) -> None:
        """Make the next `n` /api/embed calls (for a known model) fail with `status`."""
        with self._lock:
            self._embed_failures.extend([status] * n)

    def wait_for_disconnects(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until `n` streams were cut by the client; the server notices on its next
        write, so a test must wait rather than assert right after closing."""
        with self._changed:
            return self._changed.wait_for(lambda: self.disconnects >= n, timeout)

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> StandIn:
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.standin = self
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},  # stop() waits up to one poll interval
            daemon=True,
            name="ollama-standin",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting and cut open connections, so idle keep-alive threads end too."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state used by the handler -------------------------------------------------------

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def _model(self, name: str, *, installed_only: bool = True) -> ModelSpec | None:
        with self._lock:
            spec = self._models.get(normalize_name(name))
        if spec is None or (installed_only and not spec.installed):
            return None
        return spec

    def _installed(self) -> list[ModelSpec]:
        with self._lock:
            return [m for m in self._models.values() if m.installed]

    def _next_reply(self, model: str) -> Reply | None:
        with self._lock:
            for key in (model, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        return None

    def _format_reply(self, body: dict) -> Reply:
        """A structured-output request: the next `script_format` reply, else the
        deterministic answer of the current `format_mode` (tests/standin_format.py)."""
        with self._lock:
            if self._format_queue:
                return self._format_queue.popleft()
            mode = self.format_mode
        content = structured_content(body, "valid" if mode == "timeout" else mode)
        return Reply(content=[content], delay=self.format_delay if mode == "timeout" else 0.0)

    def _default_reply(self, raw_model: str) -> Reply:
        if self._tokens is not None:
            return Reply(content=[self._chunk_text] * self._tokens, delay=self._delay)
        return Reply(
            content=f"Hello from {raw_model}.",
            thinking="The user greeted me. I should greet them back.",
        )

    def _next_call_id(self) -> str:
        with self._lock:
            self._call_counter += 1
            n = self._call_counter
        return "call_" + hashlib.blake2b(n.to_bytes(8, "little"), digest_size=4).hexdigest()

    def _note_disconnect(self) -> None:
        with self._changed:
            self.disconnects += 1
            self._changed.notify_all()

    def _note_embed(self, n_inputs: int, *, known: bool) -> int | None:
        """Count an embed call; return the status of an injected failure, if one is due
        (only calls for a known model use one up)."""
        with self._lock:
            self.embed_calls += 1
            self.embed_inputs += n_inputs
            if known and self._embed_failures:
                return self._embed_failures.popleft()
            return None

    def _embedding(self, step: int) -> None:
        """One more (or one fewer) delayed /api/embed request in progress."""
        with self._lock:
            self._embeds_now += step
            self.embeds_at_once = max(self.embeds_at_once, self._embeds_now)

    def _embedder(self, spec: ModelSpec) -> Embedder:
        with self._lock:
            custom = self._embedders.get(spec.name)
        if custom is None:
            return lambda texts: hashed_embeddings(
                texts, spec.embedding_length, max_tokens=spec.context_length
            )

        def serialised(texts: list[str]) -> list[list[float]]:
            # Plugged-in models (MiniLM) load lazily and need not be thread-safe.
            with self._custom_embed_lock:
                return custom(texts)

        return serialised

    def _load(self, spec: ModelSpec, keep_alive: Any, num_ctx: Any) -> None:
        seconds = _parse_keep_alive(keep_alive)
        if seconds is None:
            seconds = DEFAULT_KEEP_ALIVE
        with self._lock:
            if seconds == 0:
                self._loaded.pop(spec.name, None)
                return
            if seconds < 0:
                expires = datetime(2318, 1, 1, tzinfo=timezone.utc)  # what "forever" shows
            else:
                expires = datetime.now(timezone.utc) + timedelta(seconds=seconds)
            ctx = num_ctx if isinstance(num_ctx, int) and num_ctx > 0 else DEFAULT_NUM_CTX
            self._loaded[spec.name] = (expires, min(ctx, spec.context_length))

    def _unload(self, spec: ModelSpec) -> None:
        with self._lock:
            self._loaded.pop(spec.name, None)

    def _running(self) -> list[tuple[ModelSpec, datetime, int]]:
        with self._lock:
            return [
                (self._models[name], expires, ctx)
                for name, (expires, ctx) in self._loaded.items()
                if name in self._models
            ]

    def _mark_installed(self, spec: ModelSpec) -> None:
        with self._lock:
            spec.installed = True
            spec.modified_at = datetime.now(timezone.utc)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


SLOPPY = "sloppy"  # add_sloppy(): a model that ignores `format`

# name, capabilities, context_length, family, parameter_size, quantization, size, embedding_dim
_DEFAULT_MODELS: tuple[tuple[Any, ...], ...] = (
    ("llama3.2", ("completion", "tools"), 131072, "llama", "3.2B", "Q4_K_M", 2_019_393_189, None),
    (
        "qwen3",
        ("completion", "tools", "thinking"),
        40960,
        "qwen3",
        "8.2B",
        "Q4_K_M",
        5_225_388_164,
        None,
    ),
    ("gemma2", ("completion",), 8192, "gemma2", "9.2B", "Q4_0", 5_443_152_417, None),
    ("nomic-embed-text", ("embedding",), 2048, "nomic-bert", "137M", "F16", 274_302_450, 768),
    ("all-minilm", ("embedding",), 512, "bert", "23M", "F16", 45_960_996, 384),
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # concurrency tests open many connections at once
    standin: StandIn

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) that can hang offline.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up is normal; anything else is a stand-in bug worth reporting."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            self.standin.errors.append(traceback.format_exc())


class _Abort(Exception):
    """The client went away mid-reply; nothing more can be sent."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "ollama-standin"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging on stderr."""

    def setup(self) -> None:
        super().setup()
        # Small chunk writes must leave at once (Go does the same); Nagle would stall them.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.standin._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the client is gone; nothing left to flush
        finally:
            self.server.standin._track(self.connection, False)

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_HEAD = do_DELETE = do_PUT = do_GET

    # --- plumbing -------------------------------------------------------------------------

    def _dispatch(self) -> None:
        standin = self.server.standin
        self._t0 = time.perf_counter_ns()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        bad_json: str | None = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                bad_json = str(exc)
        path = self.path.split("?", 1)[0]
        standin._record(
            Recorded(self.command, path, body, {k.lower(): v for k, v in self.headers.items()})
        )
        try:
            self._route(path, body, bad_json)
        except _Abort:  # the client went away (closed, or killed mid-request)
            self.close_connection = True
        except Exception:  # a stand-in bug: report it to the client and to the test
            standin.errors.append(traceback.format_exc())
            self.close_connection = True
            with contextlib.suppress(Exception):
                self._send_error(500, "stand-in failure: " + traceback.format_exc(limit=1))

    def _route(self, path: str, body: Any, bad_json: str | None) -> None:
        route = _ROUTES.get((self.command, path))
        if route is None:
            self._send(404, b"404 page not found", "text/plain")
            return
        if self.command == "POST":
            if bad_json is not None:
                self._send_error(400, f"invalid JSON in request body: {bad_json}")
                return
            if not isinstance(body, dict):
                self._send_error(400, "missing request body")
                return
        route(self, body or {})

    def _write(self, data: bytes | bytearray, *, stream: bool = False) -> None:
        try:
            self.wfile.write(data)
        except DISCONNECT_ERRORS:
            if stream:
                self.server.standin._note_disconnect()
            raise _Abort from None

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        try:
            self.end_headers()
        except DISCONNECT_ERRORS:
            raise _Abort from None
        if self.command != "HEAD":
            self._write(body)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, _dumps(obj), "application/json; charset=utf-8")

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": message})

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        try:
            self.end_headers()
        except DISCONNECT_ERRORS:
            self.server.standin._note_disconnect()
            raise _Abort from None

    def _stream_lines(self, objs: Sequence[Any]) -> None:
        """A short status stream (pull): one chunk per line, then the terminating chunk."""
        self._start_stream()
        self._write(b"".join(_frame(_dumps(o) + b"\n") for o in objs) + _LAST_CHUNK, stream=True)

    # --- endpoints ------------------------------------------------------------------------

    def root(self, body: dict) -> None:
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")

    def version(self, body: dict) -> None:
        self._send_json(200, {"version": VERSION})

    def tags(self, body: dict) -> None:
        models = [
            {
                "name": m.name,
                "model": m.name,
                "modified_at": _rfc3339(m.modified_at),
                "size": m.size,
                "digest": m.digest,
                "details": m.details(),
            }
            for m in self.server.standin._installed()
        ]
        self._send_json(200, {"models": models})

    def ps(self, body: dict) -> None:
        models = [
            {
                "name": m.name,
                "model": m.name,
                "size": m.size,
                "digest": m.digest,
                "details": m.details(),
                "expires_at": _rfc3339(expires),
                "size_vram": m.size,
                "context_length": ctx,
            }
            for m, expires, ctx in self.server.standin._running()
        ]
        self._send_json(200, {"models": models})

    def show(self, body: dict) -> None:
        raw = body.get("model") or body.get("name")
        if not isinstance(raw, str) or not raw:
            self._send_error(400, "model is required")
            return
        spec = self.server.standin._model(raw)
        if spec is None:
            self._send_error(404, f"model '{raw}' not found")
            return
        self._send_json(200, _show_body(spec))

    def pull(self, body: dict) -> None:
        raw = body.get("model") or body.get("name")
        if not isinstance(raw, str) or not raw:
            self._send_error(400, "model is required")
            return
        standin = self.server.standin
        spec = standin._model(raw, installed_only=False)
        stream = body.get("stream", True) is not False
        if spec is None:
            if stream:
                self._stream_lines([{"status": "pulling manifest"}, {"error": PULL_UNKNOWN_ERROR}])
            else:
                self._send_error(500, PULL_UNKNOWN_ERROR)
            return
        statuses: list[dict[str, Any]] = [{"status": "pulling manifest"}]
        for digest, total in _layers(spec):
            short = f"pulling {digest[:12]}"
            layer = {"digest": f"sha256:{digest}", "total": total}
            statuses.append({"status": short, **layer})
            statuses.extend(
                {"status": short, **layer, "completed": total * k // 3} for k in (1, 2, 3)
            )
        statuses += [
            {"status": "verifying sha256 digest"},
            {"status": "writing manifest"},
            {"status": "success"},
        ]
        standin._mark_installed(spec)
        if stream:
            self._stream_lines(statuses)
        else:
            self._send_json(200, {"status": "success"})

    def embed(self, body: dict) -> None:
        standin = self.server.standin
        raw = body.get("model")
        if not isinstance(raw, str) or not raw:
            self._send_error(400, "model is required")
            return
        given = body.get("input")
        if isinstance(given, str):
            texts = [given] if given else []
        elif isinstance(given, list) and all(isinstance(t, str) for t in given):
            texts = list(given)
        elif given is None:
            texts = []
        else:
            self._send_error(400, "invalid input type")
            return
        spec = standin._model(raw)
        injected = standin._note_embed(len(texts), known=spec is not None)
        if spec is None:
            self._send_error(404, f'model "{raw}" not found, try pulling it first')
            return
        if injected is not None:
            self._send_error(
                injected, BUSY_ERROR if injected == 503 else HTTPStatus(injected).phrase
            )
            return
        if not texts:
            self._send_json(200, {"model": raw, "embeddings": []})
            return
        if standin.embed_delay:
            standin._embedding(+1)
            try:
                time.sleep(standin.embed_delay)
            finally:
                standin._embedding(-1)
        counts = [len(_WORD.findall(t)) or 1 for t in texts]
        if body.get("truncate") is False and max(counts) > spec.context_length:
            self._send_error(400, "the input length exceeds the context length")
            return
        try:
            vectors = standin._embedder(spec)(texts)
        except Exception as exc:  # a plugged-in model failing is a server error, as in Ollama
            self._send_error(500, f"{type(exc).__name__}: {exc}")
            return
        if len(vectors) != len(texts):
            raise ValueError(f"embedder returned {len(vectors)} vectors for {len(texts)} inputs")
        dims = body.get("dimensions")
        if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0:
            vectors = [_l2_normalize(v[:dims]) for v in vectors]
        else:
            vectors = [[float(x) for x in v] for v in vectors]
        standin._load(spec, body.get("keep_alive"), None)
        total = time.perf_counter_ns() - self._t0
        self._send_json(
            200,
            {
                "model": raw,
                "embeddings": vectors,
                "total_duration": max(total, 1),
                "load_duration": max(total // 10, 1),
                "prompt_eval_count": sum(min(c, spec.context_length) for c in counts),
            },
        )

    def chat(self, body: dict) -> None:
        standin = self.server.standin
        raw = body.get("model")
        if not isinstance(raw, str) or not raw:
            self._send_error(400, "model is required")
            return
        spec = standin._model(raw)
        if spec is None:
            self._send_error(404, f"model '{raw}' not found")
            return
        messages = body.get("messages") or []
        keep_alive = body.get("keep_alive")
        if not messages and _parse_keep_alive(keep_alive) == 0:
            standin._unload(spec)
            self._send_json(200, self._bare_done(raw, "unload"))
            return
        if "completion" not in spec.capabilities:
            self._send_error(400, f'"{raw}" does not support chat')
            return
        if body.get("tools") and "tools" not in spec.capabilities:
            self._send_error(400, f"{REGISTRY_PREFIX}{spec.name} does not support tools")
            return
        images, bad_image = _images(messages)
        if bad_image is not None:
            self._send_error(400, bad_image)
            return
        if images and "vision" not in spec.capabilities:
            self._send_error(500, NO_VISION_ERROR)  # Ollama's engine since 0.6.1
            return
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        standin._load(spec, keep_alive, options.get("num_ctx"))
        if not messages:
            self._send_json(200, self._bare_done(raw, "load"))
            return
        think = body.get("think")
        thinks = "thinking" in spec.capabilities
        if think and not thinks:
            self._send_error(400, f'"{raw}" does not support thinking')
            return
        fmt = body.get("format")
        if fmt not in (None, "") and spec.name.split(":")[0] == SLOPPY:  # prose, whatever
            reply = standin._next_reply(spec.name) or Reply(
                content=structured_content(body, "prose"))
        elif fmt not in (None, ""):
            if not valid_format(fmt):
                self._send_error(400, INVALID_FORMAT)
                return
            reply = standin._format_reply(body)
        else:
            reply = standin._next_reply(spec.name) or (
                Reply(content=seen_reply(images)) if images else standin._default_reply(raw))
        if reply.http_status is not None:
            message = reply.http_error or (
                BUSY_ERROR if reply.http_status == 503 else HTTPStatus(reply.http_status).phrase
            )
            self._send_error(reply.http_status, message)
            return
        if reply.offered_only:
            reply = _offered_calls_only(reply, body.get("tools") or [])
        steps = _steps(reply, thinking=thinks and think is not False)
        calls = _wire_tool_calls(reply.tool_calls, standin._next_call_id)
        if calls and not reply.tool_calls_on_done:
            steps.append(("tools", ""))
        if body.get("stream", True) is False:
            self._chat_whole(raw, reply, steps, calls)
        else:
            self._chat_stream(raw, reply, steps, calls)

    def _bare_done(self, raw: str, reason: str) -> dict[str, Any]:
        return {
            "model": raw,
            "created_at": _rfc3339(),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": reason,
        }

    def _done_tail(self, reply: Reply, steps: list[tuple[str, str]], t_first: int) -> dict:
        now = time.perf_counter_ns()
        prompt_eval = 1000 * max(reply.prompt_eval_count, 1)
        eval_count = reply.eval_count
        if eval_count is None:
            eval_count = sum(1 for kind, _ in steps if kind == "content")
        return {
            "done": True,
            "done_reason": reply.done_reason,
            "total_duration": now - self._t0 + prompt_eval,
            "load_duration": max(t_first - self._t0, 1),
            "prompt_eval_count": reply.prompt_eval_count,
            "prompt_eval_duration": prompt_eval,
            "eval_count": eval_count,
            "eval_duration": max(now - t_first, 1),
        }

    def _chat_stream(
        self, raw: str, reply: Reply, steps: list[tuple[str, str]], calls: list[dict]
    ) -> None:
        """Stream the reply; fast replies are written in batches of frames, slow ones
        chunk by chunk so a client that hangs up is noticed on the next write."""
        cut, ending = _ending(reply, len(steps))
        enc = _Encoder(raw)
        t_first = time.perf_counter_ns()
        self._start_stream()
        out = bytearray()
        for i, (kind, text) in enumerate(steps[:cut]):
            if reply.delay and i:
                time.sleep(reply.delay)
                enc.refresh()
            if kind == "tools":
                message = {"role": "assistant", "content": "", "tool_calls": calls}
                out += _frame(enc.line(message, {"done": False}))
            else:
                out += enc.piece(kind, text)
            if reply.delay or len(out) >= WRITE_BATCH:
                self._write(out, stream=True)
                out.clear()
        if ending == "drop":
            if out:
                self._write(out, stream=True)
            self.close_connection = True  # FIN without the terminating chunk
            return
        if reply.delay and cut:
            time.sleep(reply.delay)
            enc.refresh()
        if ending == "error":
            out += _frame(_dumps({"error": RUNTIME_ERROR}) + b"\n")
        else:
            message: dict[str, Any] = {"role": "assistant", "content": ""}
            if calls and reply.tool_calls_on_done:
                message["tool_calls"] = calls
            out += _frame(enc.line(message, self._done_tail(reply, steps, t_first)))
        self._write(out + _LAST_CHUNK, stream=True)

    def _chat_whole(
        self, raw: str, reply: Reply, steps: list[tuple[str, str]], calls: list[dict]
    ) -> None:
        """stream:false waits for the whole generation, then sends one object."""
        t_first = time.perf_counter_ns()
        cut, ending = _ending(reply, len(steps))
        if reply.delay:
            time.sleep(reply.delay * cut)
        if ending == "drop":
            self.close_connection = True  # no response at all
            return
        if ending == "error":
            self._send_error(500, RUNTIME_ERROR)
            return
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(t for k, t in steps if k == "content"),
        }
        thinking = "".join(t for k, t in steps if k == "thinking")
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = calls
        obj = {"model": raw, "created_at": _rfc3339(), "message": message}
        obj.update(self._done_tail(reply, steps, t_first))
        self._send_json(200, obj)


_ROUTES: dict[tuple[str, str], Callable[[_Handler, dict], None]] = {
    ("GET", "/"): _Handler.root,
    ("HEAD", "/"): _Handler.root,
    ("GET", "/api/version"): _Handler.version,
    ("GET", "/api/tags"): _Handler.tags,
    ("GET", "/api/ps"): _Handler.ps,
    ("POST", "/api/show"): _Handler.show,
    ("POST", "/api/pull"): _Handler.pull,
    ("POST", "/api/embed"): _Handler.embed,
    ("POST", "/api/chat"): _Handler.chat,
}


def seen_reply(images: Sequence[bytes]) -> str:
    """What a vision model of the stand-in answers about the pictures it received: each
    one's size and sha256, so a test checks the bytes that reached the wire."""
    seen = "; ".join(f"{len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}"
                     for data in images)
    return f"I see {len(images)} image(s): {seen}."


def _images(messages: Any) -> tuple[list[bytes], str | None]:
    """The pictures of every message (Ollama's `images`: base64 strings), decoded; or
    Ollama's 400 text for one that is not base64."""
    import base64
    import binascii

    out: list[bytes] = []
    for message in messages if isinstance(messages, list) else []:
        for text in (message.get("images") or []) if isinstance(message, dict) else []:
            try:
                out.append(base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError, TypeError):
                return [], "illegal base64 data at input byte 0"
    return out, None


def _check_reply(reply: Reply) -> None:
    """Fail at script time, in the test, rather than as a 500 in the middle of a chat."""
    if not isinstance(reply, Reply):
        raise TypeError(f"script() takes Reply objects, not {type(reply).__name__}")
    for call in reply.tool_calls:
        fn = call.get("function", call)
        if not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments", {}), dict):
            raise ValueError(f"tool call needs a str 'name' and dict 'arguments': {call!r}")


def _offered_calls_only(reply: Reply, tools: list[Any]) -> Reply:
    """The reply as Ollama parses it when the request offered `tools`: calls to other
    names stay the text the model wrote, after the content."""
    import dataclasses

    offered = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    kept, text = [], []
    for call in reply.tool_calls:
        fn = call.get("function", call)
        if fn["name"] in offered:
            kept.append(call)
        else:
            text.append(json.dumps({"name": fn["name"], "arguments": fn.get("arguments", {})}))
    content = reply.content if isinstance(reply.content, str) else "".join(reply.content)
    return dataclasses.replace(reply, tool_calls=kept, content=content + "".join(text))


def _steps(reply: Reply, *, thinking: bool) -> list[tuple[str, str]]:
    """The non-final chunks in order: thinking first (only when the model thinks)."""
    steps = [("thinking", t) for t in split_pieces(reply.thinking)] if thinking else []
    steps += [("content", c) for c in split_pieces(reply.content)]
    return steps


def _ending(reply: Reply, n_steps: int) -> tuple[int, str]:
    """How many chunks go out and what follows them: "done", "error" or "drop".

    The done chunk counts as chunk n+1, so `error_after=n` replaces it with the error line
    and `error_after > n` never fires.
    """
    cut, ending = n_steps, "done"
    if reply.error_after is not None and reply.error_after <= n_steps:
        cut, ending = reply.error_after, "error"
    if (
        reply.drop_after is not None
        and reply.drop_after <= n_steps
        and reply.drop_after < (cut + (ending == "done"))
    ):
        cut, ending = reply.drop_after, "drop"
    return cut, ending


def _layers(spec: ModelSpec) -> list[tuple[str, int]]:
    """Blob digests and sizes of a model: the weights, then template and params."""
    seed = spec.digest
    return [
        (hashlib.sha256(f"{seed}/{part}".encode()).hexdigest(), size)
        for part, size in (("weights", spec.size), ("template", 1_429), ("params", 96))
    ]


def _parameter_count(size: str) -> int:
    match = re.fullmatch(r"([\d.]+)\s*([KMB]?)", size.strip().upper())
    if not match:
        return 0
    return int(float(match.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "B": 1e9}[match.group(2)])


def _show_body(spec: ModelSpec) -> dict[str, Any]:
    arch = spec.family
    embedding_only = "completion" not in spec.capabilities
    if embedding_only:
        template = "{{ .Prompt }}"
        params = {"num_ctx": [str(spec.context_length)]}
    else:
        template = (
            "{{- if .System }}<|system|>{{ .System }}<|end|>{{ end }}"
            + (
                "{{- if .Tools }}<|tools|>{{ range .Tools }}{{ . }}{{ end }}<|end|>{{ end }}"
                if "tools" in spec.capabilities
                else ""
            )
            + "{{- range .Messages }}<|{{ .Role }}|>"
            + (
                "{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}"
                if "thinking" in spec.capabilities
                else ""
            )
            + "{{ .Content }}<|end|>{{ end }}<|assistant|>"
        )
        params = {"stop": ['"<|end|>"', '"<|user|>"'], "temperature": ["0.6"]}
    parameters = "\n".join(f"{k:<30} {v}" for k, vs in params.items() for v in vs)
    modelfile = (
        '# Modelfile generated by "ollama show"\n'
        "# To build a new Modelfile based on this, replace FROM with:\n"
        f"# FROM {spec.name}\n\n"
        f"FROM /root/.ollama/models/blobs/sha256-{_layers(spec)[0][0]}\n"
        f'TEMPLATE """{template}"""\n'
        + "".join(f"PARAMETER {k} {v}\n" for k, vs in params.items() for v in vs)
    )
    return {
        "license": "",
        "modelfile": modelfile,
        "parameters": parameters,
        "template": template,
        "details": spec.details(),
        "model_info": {
            "general.architecture": arch,
            "general.file_type": 15,
            "general.parameter_count": _parameter_count(spec.parameter_size),
            "general.quantization_version": 2,
            f"{arch}.context_length": spec.context_length,
            f"{arch}.embedding_length": spec.embedding_length,
            f"{arch}.block_count": 32,
            "tokenizer.ggml.model": "bert" if embedding_only else "gpt2",
        },
        "capabilities": list(spec.capabilities),
        "modified_at": _rfc3339(spec.modified_at),
    }


def _import_embedder(plug: str, parser: argparse.ArgumentParser) -> tuple[str, Embedder]:
    model, _, target = plug.partition("=")
    module_name, _, attr = target.partition(":")
    if not (model and module_name and attr):
        parser.error(f"--embedder wants MODEL=MODULE:FACTORY, got {plug!r}")
    import importlib

    made = getattr(importlib.import_module(module_name), attr)()
    return model, made.embed if hasattr(made, "embed") else made


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.standin", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument(
        "--tokens",
        type=int,
        default=None,
        help="every chat reply is N content chunks, sent as fast as possible",
    )
    parser.add_argument("--chunk-text", default="tok ", help="text of each --tokens chunk")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--embed-delay", type=float, default=0.0,
                        help="seconds each embedding request waits before answering")
    parser.add_argument(
        "--embedder",
        action="append",
        default=[],
        metavar="MODEL=MODULE:FACTORY",
        help="plug a real embedder, e.g. all-minilm=tests.embedder.minilm:MiniLM "
        "(FACTORY() gives an object with .embed(texts) or a callable)",
    )
    args = parser.parse_args(argv)
    standin = StandIn(port=args.port, tokens=args.tokens, chunk_text=args.chunk_text,
                      delay=args.delay)
    standin.embed_delay = args.embed_delay
    for plug in args.embedder:
        model, fn = _import_embedder(plug, parser)
        standin.set_embedder(model, fn)
    standin.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(standin.url, flush=True)
    while not stop.wait(0.2):
        pass
    standin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
