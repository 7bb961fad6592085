"""The driver's Ray connection: joined or started, bounded in time, quiet, and left.

Ray is imported here only, and only when `--engine ray` asks for it. Without `--address`
a Ray instance is started inside this process with the machine's cores (gone when the
run ends); with one, the driver joins that cluster. Either way a cluster that does not
answer is one line and exit 3, not a wait without end: the address is tried first (a
refused connection fails at once), joining has the deadline (`--ray-timeout`), and
while the run goes on each block of results must arrive within it too (`stream`)."""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from localgpt_cli import threads
from localgpt_cli.errors import ClusterUnreachable, InvalidInput

CONNECT_SECONDS = 60.0
INSTALL_HINT = "Install it: pip install -e '.[ray]' (in the localgpt source folder)."

T = TypeVar("T")


def check(address: str | None) -> None:
    """Before any work, without importing Ray (seconds): the extra is installed and
    something listens at the address."""
    import importlib.util

    if any(importlib.util.find_spec(name) is None for name in ("ray", "lance_ray")):
        import_ray()
    if address:
        _refused(address)


def import_ray() -> Any:
    """The `ray` module, or one line naming the extra to install."""
    # Ray joins a cluster where `cluster` says only, never again on its own: after Ctrl-C
    # left it, Ray Data's reader thread, still running, joined it anew (Ray's auto-connect)
    # and raced the exit (a traceback from ray.init).
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    try:
        import lance_ray  # noqa: F401  (checked here: the workers write with it)
        import ray
    except ImportError:
        raise InvalidInput(
            "--engine ray needs the [ray] extra (ray and lance-ray).",
            code="missing_extra",
            hint=INSTALL_HINT,
        ) from None
    from localgpt_cli.rag.store.lancedb_import import pyarrow_sees_pandas

    pyarrow_sees_pandas()  # Ray Data hands pyarrow pandas objects
    return ray


@contextmanager
def cluster(address: str | None, deadline: float = CONNECT_SECONDS) -> Iterator[Any]:
    """Connected to the cluster at `address` (a Ray instance of this process if None)
    for the block; left at its end, which stops this run's tasks and actors."""
    if address:
        _driver_settings(deadline)  # before Ray is imported: its core reads them then
    ray = import_ray()
    where = address or "a Ray instance in this process"
    if address:
        _refused(address)
    options: dict[str, Any] = {
        "address": address,
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "configure_logging": True,
    }
    if address:
        _joined(lambda: ray.init(**options), deadline, where)
    else:
        # Started on this thread: Ray's processes die with the thread that started them;
        # "local": a new instance even when a cluster runs on this machine.
        options["address"] = "local"
        ray.init(num_cpus=os.cpu_count() or 1, **options)
    _quiet(ray)
    try:
        yield ray
    finally:
        if not _hung.is_set():  # leaving a stopped cluster would wait on it too
            ray.shutdown()
        else:
            atexit.register(_end_now, getattr(sys.exc_info()[1], "exit_code", 3))


def _end_now(code: int) -> None:
    """The last exit handler (registered last, run first) after the cluster stopped
    answering: the error is said and the output flushed, and Ray's own teardown would
    wait on the lost cluster, or crash in it (SIGSEGV after a dead head, seen here).
    Exit handlers run before Python flushes its streams: flushed here, or the records
    still buffered for a pipe would be lost."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # a closed pipe: nothing left to save
            stream.flush()
    os._exit(code)


_hung = threading.Event()  # the cluster stopped answering: leaving it would wait too


def _driver_settings(deadline: float) -> None:
    """Ray's core in this process joining a cluster, read from the environment when Ray
    is imported (a user's own values win; an instance started here would pass them on to
    its own processes). When the head dies mid-run (killed, out of memory) the end of the
    run must be ours: one line and exit 3 after `deadline` (`stream`). Ray's own ends the
    process 60 s after it lost the GCS, exit 1, with no error record; its clock is set
    past ours, by the time a commit in between may take on a slow store. Its C++ log
    lines (the GCS it cannot reach, every second, also after our line) are not for the
    person running ingest: only a fatal one is written."""
    reconnect = str(round(deadline + 300))
    os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", reconnect)
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")


def _quiet(ray: Any) -> None:
    """No progress bars or execution logs on stderr: the run's own events say it all.
    Ray prints the cluster's error notes (a worker died, with its pid) on the driver's
    stdout, which holds the run's records only: they go to stderr instead."""
    from ray._private import worker

    printed = worker.print_to_stdstream
    if not getattr(printed, "to_stderr", False):

        def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            printed({**data, "is_err": True}, *args, **kwargs)

        to_stderr.to_stderr = True  # type: ignore[attr-defined]
        worker.print_to_stdstream = to_stderr
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.execution_options.preserve_order = True  # events in the plain engine's order
    context.max_errored_blocks = -1  # a lost block fails its files; the run goes on
    for name in ("ray", "ray.data", "ray.data._internal"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _refused(address: str) -> None:
    """Fail at once when nothing listens at `HOST:PORT` (a cluster not started)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise ClusterUnreachable(
            f"No Ray cluster at {address}: {exc.strerror or exc}.",
            hint="Start one there (ray start --head) or check --address.",
        ) from None


def _joined(call: Callable[[], T], seconds: float, where: str) -> T:
    """`call()` (joining the cluster), or ClusterUnreachable if it has not returned within
    `seconds` or could not connect."""

    def late(_started: bool, limit: float) -> ClusterUnreachable:
        _hung.set()
        return ClusterUnreachable(
            f"The Ray cluster at {where} did not answer within {limit:.0f} s.",
            hint="Check that it runs (ray status) and that this machine can reach it.",
        )

    try:
        return threads.within(call, seconds, late, "ray-connect")
    except ClusterUnreachable:
        raise
    except Exception as exc:
        if isinstance(exc, (ConnectionError, TimeoutError)) or "connect" in str(exc):
            raise ClusterUnreachable(
                f"Cannot join the Ray cluster at {where}: {_first_line(exc)}",
                hint="Check that it runs (ray status) and --address.",
            ) from exc
        raise


def _first_line(exc: BaseException) -> str:
    """The first line of what `exc` says, or its kind when it says nothing."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def stream(items: Iterable[T], idle: float, where: str) -> Iterator[T]:
    """`items`, each of which must arrive within `idle` seconds of asking for it (a
    stopped cluster answers nothing): ClusterUnreachable, and what was committed is kept.
    At most two blocks wait for the driver, so a slow commit holds no more in memory."""

    def late(_started: bool, limit: float) -> ClusterUnreachable:
        _hung.set()
        return ClusterUnreachable(
            f"The Ray cluster at {where} sent nothing for {limit:.0f} s.",
            hint="What was committed is kept; run again once the cluster answers "
            "(ray status), or raise --ray-timeout.",
        )

    return threads.paced(items, idle, idle, late, name="ray-results", ahead=2)
