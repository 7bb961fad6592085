"""How a tool's code runs inside the CLI: its stdout captured, whatever it raises contained.

A tool is someone else's Python running in our process between the packets of an NDJSON
stream. Whatever it writes to stdout — `print()`, `sys.__stdout__`, `os.write(1, …)`, a
subprocess inheriting file descriptor 1 — is captured and handed back (it becomes part of
the tool's result), so stdout carries only what localgpt writes. Whatever it raises,
`SystemExit`, `KeyboardInterrupt` and `GeneratorExit` included, is handed back too: a
plugin that calls `sys.exit()` fails its call, not the user's turn.

Only a real interrupt ends the turn: while a tool runs, SIGINT and SIGTERM pass through a
handler that notes the signal before doing what the previous handler did, so a Ctrl-C
is told apart from a tool raising `KeyboardInterrupt` itself — and still ends the turn
when the tool catches it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any

MAX_OUTPUT_CHARS = 20_000
_WATCHED = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Outcome:
    """What one call did: its return value or what it raised, and what it wrote."""

    value: Any = None
    error: BaseException | None = None
    output: str = ""


class _Interrupts:
    """Watches SIGINT/SIGTERM while a tool runs, to tell a real interrupt from a raised one.

    While the tool's own code runs (`armed`) a signal goes to the previous handler at
    once (which raises KeyboardInterrupt), and is remembered: if the tool swallows it, it
    is raised again on exit. Outside (setting up and restoring stdout) a signal waits
    until exit, so the restore always completes.
    """

    def __init__(self) -> None:
        self.armed = False
        self._interrupted = False
        self._pending: list[int] = []
        self._previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def __enter__(self) -> _Interrupts:
        for signum in _WATCHED:
            previous = signal.getsignal(signum)
            if not callable(previous):
                continue  # ignored or default: our handler would change what it does
            try:
                signal.signal(signum, self._on_signal)
            except ValueError:
                break  # not the main thread: no signal is delivered here anyway
            self._previous[signum] = previous
        return self

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self.armed:
            self._pending.append(signum)
            return
        try:
            self._previous[signum](signum, frame)
        except KeyboardInterrupt:
            self._interrupted = True
            raise

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        if kind is KeyboardInterrupt:
            return
        for signum in self._pending:
            self._previous[signum](signum, None)
        if self._interrupted:
            raise KeyboardInterrupt


def _flush(stream: IO[str] | None) -> None:
    if stream is None:
        return
    try:  # noqa: SIM105 - not contextlib.suppress: this runs four times a call
        stream.flush()
    except Exception:  # a closed or broken stream: nothing to flush
        pass


_sinks: dict[int, IO[bytes]] = {}


def _sink() -> IO[bytes]:
    """This process's capture file, empty: one temporary file reused by every call (calls
    run one at a time), since creating one per call cost as much as a small read_file.
    Keyed by pid, so a forked child never shares its parent's file offset."""
    sink = _sinks.get(os.getpid())
    if sink is None or sink.closed:
        sink = _sinks[os.getpid()] = tempfile.TemporaryFile()  # noqa: SIM115 - kept open
    sink.seek(0)
    sink.truncate()
    return sink


@contextlib.contextmanager
def _stdout_captured(outcome: Outcome) -> Iterator[None]:
    """Point sys.stdout and file descriptor 1 at a temporary file; read it back on exit."""
    _flush(sys.stdout)
    _flush(sys.__stdout__)
    sink = _sink()
    try:
        saved: int | None = os.dup(1)
    except OSError:
        saved = None  # stdout is closed: only sys.stdout can be redirected
    if saved is not None:
        os.dup2(sink.fileno(), 1)
    text = open(  # noqa: SIM115 - closed below, after the tool
        sink.fileno(), "w", buffering=1, encoding="utf-8", errors="replace", closefd=False
    )
    try:
        with contextlib.redirect_stdout(text):
            yield
    finally:
        _flush(text)
        text.close()
        if saved is not None:
            _flush(sys.__stdout__)  # what the tool left in its buffer is the tool's
            os.dup2(saved, 1)
            os.close(saved)
        outcome.output = _read_back(sink)


def _read_back(sink: IO[bytes]) -> str:
    """The captured bytes as text, cut at MAX_OUTPUT_CHARS with a visible marker."""
    size = os.fstat(sink.fileno()).st_size
    sink.seek(0)
    text = sink.read(MAX_OUTPUT_CHARS * 4).decode("utf-8", errors="replace")
    if len(text) > MAX_OUTPUT_CHARS or size > MAX_OUTPUT_CHARS * 4:
        text = text[:MAX_OUTPUT_CHARS] + (
            f"\n[… truncated: showed {MAX_OUTPUT_CHARS} characters of {size} bytes of output]"
        )
    return text


def run_contained(func: Callable[[Any], Any], argument: Any) -> Outcome:
    """`func(argument)` with stdout captured and any exception returned, not raised.

    Raises KeyboardInterrupt only when SIGINT or SIGTERM really arrived meanwhile.
    """
    outcome = Outcome()
    with _Interrupts() as interrupts, _stdout_captured(outcome):
        interrupts.armed = True
        try:
            outcome.value = func(argument)
        except BaseException as exc:  # noqa: B036 - a tool's SystemExit is the tool's failure
            outcome.error = exc
        finally:
            interrupts.armed = False
    return outcome
