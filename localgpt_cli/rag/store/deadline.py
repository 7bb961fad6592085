"""A hard deadline around every LanceDB call on an object store.

The request deadlines (remote.py) bound each HTTP request, but one LanceDB call makes
several requests and retries some of them itself: against a stopped S3 server,
`lancedb.connect` took 123 s to fail and `LanceTable.add` 40 s, with 10 s per request.
So on an object store each call runs on a worker thread (threads.py) and is abandoned
when it has not returned within CALL_DEADLINE_SECONDS: the command says the store is not
responding and exits, and the abandoned call ends with the process (its thread is a
daemon, and LanceDB's own event loop too). Index builds are exempt: they are long by nature (k-means
over every vector) and their requests are bounded all the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from localgpt_cli import threads
from localgpt_cli.errors import LocalGPTError, StoreUnreachable
from localgpt_cli.rag.store import remote

CALL_DEADLINE_SECONDS = 30.0
# Calls that may run long for a good reason: building an index, compacting.
_EXEMPT = frozenset({"create_index", "create_scalar_index", "create_fts_index", "optimize"})

T = TypeVar("T")


def within(call: Callable[[], T], uri: str, seconds: float = CALL_DEADLINE_SECONDS) -> T:
    """`call()`, or StoreUnreachable naming `uri` if it has not returned in `seconds`."""

    def late(_started: bool, limit: float) -> StoreUnreachable:
        return StoreUnreachable(
            f"{uri} is not responding (a request was not answered within {limit:.0f} s).",
            hint="What was committed is kept; run again once the object store answers.",
        )

    try:
        return threads.within(call, seconds, late, "store-call")
    except Exception as exc:
        if not isinstance(exc, LocalGPTError) and remote.is_store_failure(exc):
            raise remote.store_error(exc, uri) from exc  # one line, for every command
        raise


class Deadlined:
    """A LanceDB object (connection, table, query or merge builder) whose every call and
    attribute read on the object store at `uri` is bounded by `within`; what it returns
    that is LanceDB's is bounded the same way."""

    def __init__(self, target: Any, uri: str):
        self._target = target
        self._uri = uri

    def __getattr__(self, name: str) -> Any:
        if isinstance(inspect.getattr_static(self._target, name, None), property):
            value = within(lambda: getattr(self._target, name), self._uri)  # may read
        else:
            value = getattr(self._target, name)
        if not callable(value):
            return self._wrap(value)
        if name in _EXEMPT:
            return value

        def bounded(*args: Any, **kwargs: Any) -> Any:
            return self._wrap(within(lambda: value(*args, **kwargs), self._uri))

        return bounded

    def _wrap(self, value: Any) -> Any:
        module = type(value).__module__ or ""
        return Deadlined(value, self._uri) if module.startswith("lancedb") else value
