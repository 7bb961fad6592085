"""Work on a daemon thread, waited for with a clock: the one way localgpt bounds a call
that may never return (a model server, an object store, a Ray cluster, a grounding
stage's model) or lets a request run while the caller goes on (the embedding queue).

Why daemon threads and not an executor: an executor's threads are joined at exit, so a
call blocked on a server that stopped answering would keep the process from ending after
its error or on Ctrl-C. A daemon thread is abandoned instead; it ends with the process
(or at its client's own read timeout). The caller gets the error its layer speaks, made
by `late(started, limit)`, as soon as the clock runs out.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, wait
from typing import TypeVar

T = TypeVar("T")

# The error for a clock that ran out: whether anything had come (`started`), which limit.
Late = Callable[[bool, float], BaseException]


def start(call: Callable[[], T], name: str) -> Future[T]:
    """`call()` on a daemon thread named `name`; its result, or what it raised, in the
    future (raised again by whoever asks for the result)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # handed to the waiting caller, who raises it
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def within(call: Callable[[], T], seconds: float, late: Late, name: str) -> T:
    """`call()`'s result (or what it raised), or `late(False, seconds)` raised once it
    has not returned within `seconds`."""
    future = start(call, name)
    if not wait([future], timeout=seconds).done:
        raise late(False, seconds)
    return future.result()


_ITEM, _ERROR, _END = range(3)


def paced(
    items: Iterable[T],
    first: float,
    idle: float,
    late: Late,
    *,
    name: str,
    is_token: Callable[[T], bool] = lambda _: True,
    ahead: int = 0,
) -> Iterator[T]:
    """`items`, read on a daemon thread, each passed on as it comes; `late(started,
    limit)` raised when no token (an item for which `is_token` holds) came within `first`
    seconds of the start, or within `idle` seconds of the caller asking for more after the
    last token (the time the caller spends on an item is not the source's silence). Items
    that are not tokens (keep-alives) pass through but do not reset the clock. With
    `ahead`, the reader waits while that many items wait for the caller, so what is held
    in memory stays bounded; 0: no bound."""
    out: queue.Queue[tuple[int, object]] = queue.Queue(ahead)
    gone = threading.Event()
    threading.Thread(target=_pump, args=(iter(items), out, gone), daemon=True,
                     name=name).start()  # fmt: skip
    since, last = time.monotonic(), None
    try:
        while True:
            limit, since = (first, since) if last is None else (idle, last)
            try:
                kind, value = out.get(timeout=max(0.0, since + limit - time.monotonic()))
            except queue.Empty:
                raise late(last is not None, limit) from None
            if kind == _END:
                return
            if kind == _ERROR:
                assert isinstance(value, BaseException)
                raise value
            token = is_token(value)  # type: ignore[arg-type]
            yield value  # type: ignore[misc]
            if token:
                last = time.monotonic()
    finally:
        gone.set()


def _pump(items: Iterator[T], out: queue.Queue[tuple[int, object]],
          gone: threading.Event) -> None:  # fmt: skip
    """The reader: every item, then the end or the error, onto `out`."""
    try:
        for item in items:
            out.put((_ITEM, item))
            if gone.is_set():  # the caller stopped reading: stop the source too
                break
    except BaseException as exc:  # handed to the caller, who raises it as its own
        out.put((_ERROR, exc))
        return
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
    out.put((_END, None))
