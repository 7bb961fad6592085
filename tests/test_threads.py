"""threads.py: the one helper behind every bounded wait (a model's answer, an object-store
call, the Ray cluster, a grounding stage) and the embedding queue's requests in flight.

What a caller relies on: the result or the call's own error comes back as if the call had
run here; a call that does not return is abandoned after its limit with the caller's own
error; a stream read ahead holds at most `ahead` items; the time the caller spends on an
item does not count as the source's silence. And the Ray join's one line when the
failure says nothing (it raised IndexError before)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from localgpt_cli import threads


class Late(Exception):
    def __init__(self, started: bool, limit: float) -> None:
        super().__init__(f"late after {limit} s (started: {started})")
        self.started = started


def test_within_gives_the_result_the_error_or_late_at_the_limit() -> None:
    assert threads.within(lambda: 42, 5, Late, "t") == 42
    with pytest.raises(TimeoutError):  # the call's own TimeoutError is not the clock's
        threads.within(_raises(TimeoutError("socket")), 5, Late, "t")
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(Late) as late:
        threads.within(release.wait, 0.3, Late, "t")
    assert time.monotonic() - started < 3  # abandoned, not waited for
    assert late.value.started is False
    release.set()


def test_paced_reads_at_most_ahead_items_beyond_the_caller() -> None:
    made = []

    def source() -> Iterator[int]:
        for i in range(100):
            made.append(i)
            yield i

    items = threads.paced(source(), 5, 5, Late, name="t", ahead=2)
    assert next(items) == 0
    time.sleep(0.5)  # the reader runs ahead as far as it may
    assert len(made) <= 4  # one taken, two waiting, one in the reader's hand
    assert list(items) == list(range(1, 100))


def test_paced_counts_silence_from_when_the_caller_asks_again() -> None:
    """The caller spends 2 s on the first item and the source is silent for 3 s after
    it: with an idle limit of 2 s the second item still comes (the caller asked again at
    2 s, so the limit runs to 4 s); a source silent past that is late."""

    def source(gap: float) -> Iterator[str]:
        yield "first"
        time.sleep(gap)
        yield "second"

    for gap, comes in ((3.0, True), (6.0, False)):
        items = threads.paced(source(gap), 5, 2, Late, name="t")
        assert next(items) == "first"
        time.sleep(2)
        if comes:
            assert next(items) == "second"
        else:
            with pytest.raises(Late) as late:
                next(items)
            assert late.value.started is True


def test_joining_ray_with_a_silent_connection_error_is_one_line() -> None:
    from localgpt_cli.errors import ClusterUnreachable
    from localgpt_cli.rag.ray import session

    with pytest.raises(ClusterUnreachable) as failed:
        session._joined(_raises(ConnectionError()), 5, "127.0.0.1:6379")
    assert failed.value.message == (
        "Cannot join the Ray cluster at 127.0.0.1:6379: ConnectionError"
    )


def _raises(exc: BaseException):  # type: ignore[no-untyped-def]
    def call() -> None:
        raise exc

    return call
