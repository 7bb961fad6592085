"""One exception hierarchy with stable error codes and exit codes.

Scripts rely on `code` (a stable snake_case string) and on the process exit code, so
each error class fixes both; the message is for people and may change. Every error a
user can cause is one of these, and the CLI turns it into one line on stderr (or an
`error` record with --json) instead of a traceback.
"""

from __future__ import annotations

from typing import Any

# Exit codes, as documented in the README's "Exit codes" table.
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_MODEL_NOT_FOUND = 4
EXIT_PARTIAL = 5
EXIT_INVALID = 6
EXIT_LOCKED = 75  # EX_TEMPFAIL: also a server that kept answering 429
EXIT_NOPERM = 77  # EX_NOPERM: the server refused the API key (401/403)
EXIT_INTERRUPTED = 130
# stdout was closed by its reader (`localgpt … | head -1`): what a process ended by
# SIGPIPE reports to the shell (128 + 13).
EXIT_PIPE = 141


class LocalGPTError(Exception):
    """Base class: an error with a stable code, an exit code and a retryable flag."""

    code = "internal_error"
    exit_code = EXIT_INTERNAL
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} {self.hint}" if self.hint else self.message

    def to_payload(self) -> dict[str, Any]:
        """The object used for `error` packets and records."""
        return {"code": self.code, "message": str(self), "retryable": self.retryable}


class UsageError(LocalGPTError):
    """A bad flag, argument or option value."""

    code = "usage_error"
    exit_code = EXIT_USAGE


class OllamaUnreachable(LocalGPTError):
    """Ollama could not be reached (refused, reset, timed out before answering)."""

    code = "ollama_unreachable"
    exit_code = EXIT_UNREACHABLE
    retryable = True


class OllamaTimeout(OllamaUnreachable):
    """Ollama did not answer within --timeout."""

    code = "ollama_timeout"


class StoreUnreachable(LocalGPTError):
    """An object store (`s3://…`) did not answer within its deadline, or the connection
    was lost: the same exit as an unreachable server, and worth retrying."""

    code = "store_unreachable"
    exit_code = EXIT_UNREACHABLE
    retryable = True


class ClusterUnreachable(LocalGPTError):
    """The Ray cluster of `ingest --engine ray --address` did not answer, or stopped
    answering within its deadline: the same exit as an unreachable server."""

    code = "ray_unreachable"
    exit_code = EXIT_UNREACHABLE
    retryable = True


class ModelNotFound(LocalGPTError):
    """The model is not pulled on the server."""

    code = "model_not_found"
    exit_code = EXIT_MODEL_NOT_FOUND


class ModelError(LocalGPTError):
    """The server answered with an error about the request or while generating."""

    code = "model_error"
    exit_code = EXIT_INTERNAL


class ServerBusy(ModelError):
    """Ollama's queue is full (503); trying again later may work."""

    code = "server_busy"
    exit_code = EXIT_UNREACHABLE
    retryable = True


class UnsupportedCapability(ModelError):
    """The model cannot do what was asked (tools, thinking, chat)."""

    code = "unsupported_capability"
    exit_code = EXIT_INVALID


class PartialFailure(LocalGPTError):
    """Some items failed; the rest were committed."""

    code = "partial_failure"
    exit_code = EXIT_PARTIAL


class InvalidInput(LocalGPTError):
    """Unreadable or malformed input, corrupt data, mismatched embedding model."""

    code = "invalid_input"
    exit_code = EXIT_INVALID


class NotFound(InvalidInput):
    """A named thing (conversation, document, collection, tool) does not exist."""

    code = "not_found"


class AmbiguousId(InvalidInput):
    """A prefix that matches more than one id; `candidates` holds (some of) those ids."""

    code = "ambiguous_id"

    def __init__(self, message: str, *, candidates: list[str], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.candidates = candidates


class LockBusy(LocalGPTError):
    """Another process holds the lock and --wait-lock ran out."""

    code = "lock_busy"
    exit_code = EXIT_LOCKED
    retryable = True


class AuthFailed(LocalGPTError):
    """The server refused the request's credentials (HTTP 401/403)."""

    code = "auth_failed"
    exit_code = EXIT_NOPERM


class RateLimited(LocalGPTError):
    """The server kept answering 429 after the retries."""

    code = "rate_limited"
    exit_code = EXIT_LOCKED
    retryable = True


def setting_error(where: str, message: str, *, hint: str | None = None) -> LocalGPTError:
    """The one rule for a bad setting's exit code, wherever it is checked.

    A value the user typed as a flag (`where` is `--host`, `--tools`, …) is a usage error
    (exit 2): the command line is what to fix. One read from an environment variable or a
    config file (`OLLAMA_HOST`, `history.url in /path/config.toml`) is invalid input
    (exit 6): the command was right, its surroundings are not. `message` names `where`,
    so the one line says which of the places to fix.
    """
    kind = UsageError if where.startswith("-") else InvalidInput
    return kind(message, hint=hint)
