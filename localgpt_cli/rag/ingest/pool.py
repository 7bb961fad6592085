"""Parsing and chunking on every core: worker processes that each parse and cut one file
at a time (`parsing.parse_chunk`), their results taken back in the files' order.

Processes, not threads: PDFium (pypdfium2) is not thread-safe, and parsing is Python
work that holds the GIL. Each worker is a fresh interpreter (`python -m
localgpt_cli.rag.ingest.worker`) rather than a fork of this one: by the time files are
parsed LanceDB has started its Rust threads, and a child forked from a threaded process
may inherit a lock some other thread held, forever; `multiprocessing`'s forkserver would
leave one more process up for the whole run (the memory budget counts every process), and
its spawn would import this command's `__main__` again in every worker. A fresh
interpreter that imports only the parsers costs ~0.13 s of one core, once a run.

Workers run in their own session, so Ctrl-C at the terminal reaches this process alone:
it stops the pool (`close`) on its way out, and a worker whose parent is gone reads the
end of its input and exits. A worker that dies (killed, out of memory) fails the file it was
parsing, alone; the files sent ahead to it go to another worker, which replaces it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import LocalGPTError
from localgpt_cli.rag.ingest.parsing import Parsed

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.document import Work
    from localgpt_cli.rag.ingest.options import IngestOptions

# Tasks and results are pickled by `pickle.dumps` and sent as bytes (`recv` unpickles
# them): `Connection.send` builds a `ForkingPickler` and copies copyreg's table each time,
# once per file each way.
PROTOCOL = pickle.HIGHEST_PROTOCOL
# Files sent ahead to each worker, so it never waits for this process between two files.
DEPTH = 2
# Below this many bytes to parse, a run parses in this process: starting the workers
# would cost more than it saves (a cron run that finds three notes changed).
POOL_MIN_BYTES = 1_000_000
# A worker that dies before taking a file is restarted at most this many times a run.
RESTARTS = 3


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def worth_a_pool(workers: int, work: list[Work]) -> bool:
    """Whether `work` is large enough for worker processes to pay for their start."""
    return workers > 1 and len(work) > 1 and sum(w.found.size for w in work) >= POOL_MIN_BYTES


class _Worker:
    """One worker process and the files sent to it, oldest first."""

    def __init__(self, opts: IngestOptions) -> None:
        root = str(Path(__file__).resolve().parents[3])  # where localgpt_cli is imported from
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "localgpt_cli.rag.ingest.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # Ctrl-C at the terminal goes to this process alone
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.send_end = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.recv_end = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.send_end.send(opts)
        self.sent: deque[int] = deque()  # sequence numbers of the files it holds
        self.broken = False  # a send failed: it is gone, its end of the pipe says so next

    def died(self) -> str:
        """Why it is gone, in a few words (it has closed its end of the pipe)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"

    def stop(self, now: bool) -> None:
        """Ask it to finish (or kill it, `now`), and reap it."""
        if not now:
            with contextlib.suppress(OSError):
                self.send_end.send(None)
        self.send_end.close()
        self.recv_end.close()
        try:
            self.proc.wait(timeout=0.1 if now else 5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def kill(self) -> None:
        """The worker and what it started (a Tesseract reading a page): its own session
        makes it the leader of their process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class ParsePool:
    """`workers` worker processes; `parsed()` yields each file's `Parsed` in order."""

    def __init__(self, opts: IngestOptions, workers: int) -> None:
        self.opts = opts
        self.size = workers
        self.workers: list[_Worker] = []
        self.restarts = 0

    def __enter__(self) -> ParsePool:
        self.workers = [_Worker(self.opts) for _ in range(self.size)]
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        self.close(now=kind is not None)

    def close(self, now: bool = False) -> None:
        """Stop every worker: gently at the end of a run, at once on an error or Ctrl-C."""
        workers, self.workers = self.workers, []
        for w in workers:
            w.stop(now)

    def parsed(self, tasks: Iterable[tuple[Work, str]]) -> Iterator[tuple[Work, str, Parsed]]:
        """(work, document id, what parsing gave) for each task, in the tasks' order.
        Files are sent ahead, at most DEPTH a worker, and at most WINDOW wait to be
        yielded, so a slow file holds back only a bounded number of parsed ones."""
        run = _Run(iter(tasks), self.size * (DEPTH + 2))
        while True:
            self._fill(run)
            if not run.waiting:
                return
            head = run.waiting[0]
            if head in run.done:
                run.waiting.popleft()
                work, doc_id = run.tasks.pop(head)
                yield work, doc_id, run.done.pop(head)
                continue
            self._collect(run)

    def _fill(self, run: _Run) -> None:
        """Send files to the workers with room, retried ones first."""
        while True:
            free = [w for w in self.workers if len(w.sent) < DEPTH and not w.broken]
            number = run.next_number() if free else None
            if number is None:
                return
            worker = min(free, key=lambda w: len(w.sent))
            work, doc_id = run.tasks[number]
            try:
                worker.send_end.send_bytes(
                    pickle.dumps((number, work.found.path, bool(work.sha256), doc_id), PROTOCOL)
                )
            except OSError:  # it died: `_collect` reads the end of its output
                worker.broken = True
                run.retry.appendleft(number)
                continue
            worker.sent.append(number)

    def _collect(self, run: _Run) -> None:
        """Wait for a worker to answer (or die); take what it answered."""
        busy = {w.recv_end: w for w in self.workers if w.sent or w.broken}
        assert busy, "a file waits that no worker holds"
        for conn in wait(list(busy)):
            worker = busy[conn]  # type: ignore[index]
            try:
                number, parsed = worker.recv_end.recv()
            except (EOFError, OSError):
                self._replace(worker, run)
                continue
            worker.sent.remove(number)
            run.done[number] = parsed

    def _replace(self, worker: _Worker, run: _Run) -> None:
        """A worker died: the file it was parsing fails alone, the others sent to it go
        to the others, and a new worker takes its place."""
        why = worker.died()
        worker.stop(now=True)
        self.workers.remove(worker)
        if worker.sent:
            first = worker.sent.popleft()
            path = run.tasks[first][0].found.path
            run.done[first] = Parsed.failed(
                "worker_died",
                f"{path}: the process parsing it was {why}; the next run tries it again",
            )
            run.retry.extend(worker.sent)
        else:
            self.restarts += 1
            if self.restarts > RESTARTS:
                raise LocalGPTError(
                    f"The ingest worker processes keep dying ({why}).",
                    hint="Run with --workers 1 to parse in this process.",
                )
        self.workers.append(_Worker(self.opts))


class _Run:
    """The files of one `parsed()` call: those taken, in order, and what came back."""

    def __init__(self, todo: Iterator[tuple[Work, str]], window: int) -> None:
        self.todo: Iterator[tuple[Work, str]] | None = todo
        self.window = window
        self.tasks: dict[int, tuple[Work, str]] = {}  # by number: taken, not yet yielded
        self.waiting: deque[int] = deque()  # their numbers, in order
        self.done: dict[int, Parsed] = {}  # parsed, not yet yielded
        self.retry: deque[int] = deque()  # sent to a worker that died before parsing them
        self.count = 0

    def next_number(self) -> int | None:
        """The next file to send: a retried one, else a new one (None: none, or the
        window is full)."""
        if self.retry:
            return self.retry.popleft()
        if self.todo is None or len(self.waiting) >= self.window:
            return None
        try:
            task = next(self.todo)
        except StopIteration:
            self.todo = None
            return None
        number, self.count = self.count, self.count + 1
        self.tasks[number] = task
        self.waiting.append(number)
        return number
