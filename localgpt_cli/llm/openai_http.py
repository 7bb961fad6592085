"""The HTTP side of the OpenAI wire (llm/openai.py): a server's status codes and the
client's exceptions as our errors, how long a 429 asks to wait, and the stream's framing
(whole lines only, and which events count as tokens for the clock of llm/deadline.py).

Kept apart from the wire format so that the provider holds what the wire says and this
module what can go wrong on the way; every failure leaves as a `localgpt_cli.errors`
class, so exit codes are the same whichever server answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import (
    AuthFailed,
    LocalGPTError,
    ModelError,
    ModelNotFound,
    OllamaTimeout,
    OllamaUnreachable,
    RateLimited,
    UnsupportedCapability,
)
from localgpt_cli.llm.deadline import Expired

if TYPE_CHECKING:
    import httpx

MAX_WAIT_429 = 30.0  # seconds: a longer Retry-After is not waited for
LOST_HINT = "The partial answer was kept."


def status_error(response: httpx.Response, host: str, profile: str, api_key_env: str | None,
                 model: str | None, tools_sent: bool,
                 format_sent: bool = False) -> LocalGPTError:  # fmt: skip
    """A non-2xx answer as one of our errors. A 400 that names tools, to a request that
    offered tools, is the server saying it cannot call them (vLLM without
    --enable-auto-tool-choice, llama-server without --jinja): `tools_unsupported`, which
    the agent loop answers by asking again without them. Likewise a 400 naming the
    response format, to a request that set one: `format_unsupported`, which a `--schema`
    turn answers with a weaker constraint (kernel/structured.py)."""
    status = response.status_code
    try:
        detail = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        detail = response.text[:200]
    if status in (401, 403):
        where = f"${api_key_env}" if api_key_env else "api_key_env"
        unset = not (api_key_env and os.environ.get(api_key_env))
        return AuthFailed(
            f"{host} refused the request (HTTP {status}) for profile {profile!r}.",
            hint=f"Check the API key in {where}" + (" (it is not set)." if unset else "."),
        )
    if status == 404 and model is not None:
        return ModelNotFound(f"Model {model!r} is not available at {host}.")
    if status == 429:
        return RateLimited(f"{host} is rate limiting (HTTP 429): {detail}", hint="Try again later.")
    if status == 400 and tools_sent and "tool" in detail.lower():
        return UnsupportedCapability(f"{host} refused tools for {model!r}: {detail}",
                                     code="tools_unsupported")  # fmt: skip
    if status == 400 and format_sent and any(
            word in detail.lower() for word in ("response_format", "json_schema", "json_object")):
        return UnsupportedCapability(f"{host} refused the response format for {model!r}: "
                                     f"{detail}", code="format_unsupported")  # fmt: skip
    return ModelError(f"{host} answered HTTP {status}: {detail}")


def translate(exc: BaseException, host: str, profile: str) -> LocalGPTError:
    """What the HTTP client (or the answer's clock) raised, as one of our errors."""
    import httpx

    if isinstance(exc, Expired):
        return exc.error(host)
    if isinstance(exc, httpx.TimeoutException):  # the client's backstop (deadline.py)
        return OllamaTimeout(f"{host} did not answer in time ({exc}).", hint="Raise --timeout.")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return OllamaUnreachable(f"The connection to {host} was lost mid-answer ({exc}).",
                                 code="connection_lost", hint=LOST_HINT)  # fmt: skip
    if isinstance(exc, httpx.TransportError | OSError):
        return OllamaUnreachable(f"{host} is not reachable ({exc}).",
                                 hint=f"Check base_url of profile {profile!r}.")
    if isinstance(exc, ValueError):
        return ModelError(f"{host} sent a reply localgpt cannot read: {exc}", code="bad_response")
    return ModelError(f"Unexpected error talking to {host}: {exc!r}")


def retry_after(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before retrying a 429: Retry-After when given, else 1, 2, 4 s."""
    try:
        wait = float(response.headers.get("Retry-After", ""))
    except ValueError:
        wait = float(2**attempt)
    return min(max(wait, 0.0), MAX_WAIT_429)


def moves_answer(event: dict[str, Any] | None) -> bool:
    """An event that moves the answer on (text, thinking, a tool call's piece, the end);
    a role-only first delta, as vLLM sends at once, does not start the idle clock."""
    if event is None or event.get("error") or event.get("usage"):
        return True
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or choice.get("message") or {}
        if choice.get("finish_reason") or delta.get("content") or delta.get("tool_calls") \
                or delta.get("reasoning_content") or delta.get("reasoning"):  # fmt: skip
            return True
    return False


def complete_lines(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The stream's lines that ended in a newline. A last line without one is what was
    on the wire when the connection was cut mid-event: it is dropped, so the answer
    counts as cut (exit 3, the partial answer kept), not as a reply that cannot be read."""
    held = b""
    for piece in pieces:
        held += piece
        *lines, held = held.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")
