"""The S3 store (`s3://`) when its server misbehaves: it hangs (SIGSTOP), dies (SIGKILL),
restarts, or refuses (bad credentials, a missing bucket). Each run of `ingest` is bounded
in time, ends with the exit code of the fault and one line naming the store, keeps every
row and manifest entry stored before, and the next run converges. Against moto's real
server on loopback (tests/s3server.py), driven by tests/faults.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import ROOT
from tests.faults import Faults, bounded
from tests.kb import paragraph
from tests.s3server import S3Server, need_moto, serving
from tests.standin import hashed_embeddings

BUCKET = "kb-faults"
DB = f"s3://{BUCKET}/kb"
LEASE = "kb/_localgpt/ingest.lease"
MANIFEST = "kb/_localgpt/manifests/default.jsonl"
DEADLINE = 60  # seconds to the one line; `bounded` allows 10 more before failing


class Gate:
    """An embedder that holds every request until opened: the run is held with the lease
    taken and the collection open, for as long as the test needs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.entered.set()
        assert self.opened.wait(180), "the test never opened the gate"
        return hashed_embeddings(texts, 768)


@pytest.fixture
def s3(isolated_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    with serving(tmp_path / "moto.log", monkeypatch, BUCKET) as server:
        yield server


def _corpus(root: Path, name: str, n: int) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"{name}{i}.md").write_text(f"# {name} {i}\n\n{paragraph(i + 10 * n)}\n")
    return folder


def _command(*args: str, db: str = DB) -> tuple[list[str], dict[str, str]]:
    return ([sys.executable, "-m", "localgpt_cli", *args],
            {**os.environ, "LOCALGPT_DB": db})  # fmt: skip


def _ingest(docs: Path, *more: str, db: str = DB, deadline: float = DEADLINE):
    command, env = _command("ingest", str(docs), *more, db=db)
    return bounded(command, deadline, env=env, cwd=str(ROOT))


def _start(docs: Path) -> subprocess.Popen[str]:
    command, env = _command("ingest", str(docs), "--json")
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)  # fmt: skip


def _finish(proc: subprocess.Popen[str], deadline: float = DEADLINE) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=deadline + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"ingest still running after {deadline + 10} s: {err}") from None
    return proc.returncode, out, err


def _one_line(stderr: str) -> str:
    """The run's only line on stderr (no traceback, no Rust debug dump)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Debug" not in stderr and "{" not in stderr, stderr
    return lines[0]


def _rows() -> int:
    from localgpt_cli.rag.store import open_store

    return int(open_store(DB).collection("default").count())


def _entries(server: S3Server) -> list[str]:
    body = server.client().get_object(Bucket=BUCKET, Key=MANIFEST)["Body"].read()
    return sorted(json.loads(line)["path"] for line in body.splitlines()[1:] if line.strip())


def _lease(server: S3Server) -> dict:
    """The lease object's fields; {"released": True} when there is none (deleted)."""
    if LEASE not in server.keys(BUCKET):
        return {"released": True}
    return json.loads(server.client().get_object(Bucket=BUCKET, Key=LEASE)["Body"].read())


def _stored_before(tmp_path: Path, server: S3Server) -> tuple[int, list[str]]:
    """Ingest a first corpus; its rows and manifest entries are what must not be lost."""
    first = _ingest(_corpus(tmp_path, "alpha", 3))
    assert first.returncode == 0, first.stderr
    return _rows(), _entries(server)


def _held(standin, docs: Path) -> tuple[subprocess.Popen[str], Gate]:
    """A run of `ingest docs` held at its first embedding request (lease taken)."""
    gate = Gate()
    standin.set_embedder("nomic-embed-text", gate)
    proc = _start(docs)
    if not gate.entered.wait(90):
        gate.opened.set()
        proc.kill()
        raise AssertionError(f"the run never asked for embeddings: {proc.communicate()}")
    return proc, gate


def _converges(tmp_path: Path, server: S3Server, rows: int, entries: list[str]) -> None:
    """Nothing stored before was lost, and a rerun (at once: a holder that is gone from
    this host does not block it) stores the second corpus."""
    assert _rows() >= rows and set(entries) <= set(_entries(server))
    again = _ingest(tmp_path / "bravo")
    assert again.returncode == 0, again.stderr
    names = sorted(Path(p).name for p in _entries(server))
    assert names == [*(f"alpha{i}.md" for i in range(3)), *(f"bravo{i}.md" for i in range(3))]
    assert _rows() > rows


@pytest.mark.slow
def test_a_store_hung_before_the_run_is_one_line_and_exit_3(s3, standin, tmp_path):
    rows, entries = _stored_before(tmp_path, s3)
    docs = _corpus(tmp_path, "bravo", 3)
    with Faults(s3).hung():
        ran = _ingest(docs)
    assert ran.returncode == 3, ran.stderr
    assert f"{DB} is not responding" in _one_line(ran.stderr)
    print(f"hung before the run: exit 3 after {ran.seconds:.1f} s")
    _converges(tmp_path, s3, rows, entries)


@pytest.mark.slow
def test_a_store_that_hangs_mid_run_is_one_line_and_exit_3(s3, standin, tmp_path):
    rows, entries = _stored_before(tmp_path, s3)
    proc, gate = _held(standin, _corpus(tmp_path, "bravo", 3))
    faults = Faults(s3)
    try:
        faults.hang()
        gate.opened.set()
        start = time.monotonic()
        code, out, err = _finish(proc)
    finally:
        faults.resume()
    (error,) = [json.loads(line) for line in out.splitlines() if '"error"' in line]
    assert code == 3 and error["retryable"] is True, err
    assert f"{DB} is not responding" in error["message"]
    print(f"hung mid-run: exit 3 {time.monotonic() - start:.1f} s after the store stopped")
    _converges(tmp_path, s3, rows, entries)


@pytest.mark.slow
def test_a_store_killed_mid_run_is_retryable_and_a_restart_converges(s3, standin, tmp_path):
    rows, entries = _stored_before(tmp_path, s3)
    proc, gate = _held(standin, _corpus(tmp_path, "bravo", 3))
    kept = s3.snapshot(BUCKET)  # what its disk would hold: moto keeps objects in memory
    Faults(s3).kill()
    gate.opened.set()
    start = time.monotonic()
    code, out, err = _finish(proc)
    (error,) = [json.loads(line) for line in out.splitlines() if '"error"' in line]
    assert code == 3, err
    assert error["code"] == "store_unreachable" and error["retryable"] is True
    assert f"{DB} is not responding" in error["message"]
    print(f"killed mid-run: exit 3 {time.monotonic() - start:.1f} s after the store died")
    # while it is down, a run fails the same way, at once
    down = _ingest(tmp_path / "bravo")
    assert down.returncode == 3 and f"{DB} is not responding" in _one_line(down.stderr)
    print(f"store down before the run: exit 3 after {down.seconds:.1f} s")
    command, env = _command("docs", "list")
    listed = bounded(command, DEADLINE, env=env, cwd=str(ROOT))
    assert listed.returncode == 3 and f"{DB} is not responding" in _one_line(listed.stderr)
    s3.start()
    s3.restore(BUCKET, kept)
    _converges(tmp_path, s3, rows, entries)


@pytest.mark.slow
def test_a_store_restarted_under_a_run_loses_nothing(s3, standin, tmp_path):
    rows, entries = _stored_before(tmp_path, s3)
    proc, gate = _held(standin, _corpus(tmp_path, "bravo", 3))
    kept = s3.snapshot(BUCKET)
    Faults(s3).kill()
    s3.start()
    s3.restore(BUCKET, kept)
    gate.opened.set()
    code, out, err = _finish(proc)
    assert code in (0, 3) and "Traceback" not in err, err  # finished, or one retryable line
    _converges(tmp_path, s3, rows, entries)


def test_a_missing_bucket_is_one_line_naming_it(s3, standin, tmp_path):
    docs = _corpus(tmp_path, "alpha", 1)
    ran = _ingest(docs, db="s3://lgb/st")
    assert ran.returncode == 6, ran.stderr
    assert _one_line(ran.stderr).startswith("localgpt: error: bucket lgb does not exist: s3://lgb/st")
    print(f"missing bucket: exit 6 after {ran.seconds:.1f} s")
    assert s3.keys(BUCKET) == []  # nothing was written anywhere


def test_refused_credentials_are_one_line_and_exit_77(isolated_env, standin, tmp_path,
                                                       monkeypatch):  # fmt: skip
    """A server that checks credentials (moto's IAM, with no key known) refuses ours."""
    need_moto()
    server = S3Server(tmp_path / "moto.log", env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"}).start()
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        ran = _ingest(_corpus(tmp_path, "alpha", 1))
    finally:
        server.stop()
    assert ran.returncode == 77, ran.stderr
    assert f"{DB} refused the credentials (InvalidAccessKeyId)" in _one_line(ran.stderr)
    print(f"refused credentials: exit 77 after {ran.seconds:.1f} s")


@pytest.mark.slow
def test_a_lease_whose_holder_was_killed_on_this_host_is_taken_over_at_once(
    s3, standin, tmp_path
):
    docs = _corpus(tmp_path, "bravo", 3)
    proc, gate = _held(standin, docs)
    proc.kill()  # SIGKILL: no release
    proc.wait()
    gate.opened.set()
    assert not _lease(s3).get("released")  # left behind, with a fresh renewal
    ran = _ingest(docs)
    assert ran.returncode == 0, ran.stderr
    assert sorted(Path(p).name for p in _entries(s3)) == [f"bravo{i}.md" for i in range(3)]
    assert _lease(s3).get("released")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_releases_the_lease(s3, standin, tmp_path, signum):
    proc, gate = _held(standin, _corpus(tmp_path, "bravo", 2))
    proc.send_signal(signum)
    code, _, err = _finish(proc)
    gate.opened.set()
    assert code == 130 and "Traceback" not in err, err
    assert _lease(s3).get("released")


@pytest.mark.slow
def test_signals_during_a_stalled_ingest_print_no_traceback(s3, standin, tmp_path):
    """SIGTERM while the store hangs, and again and again while the run is ending (in
    its lease's release, in the interpreter's exit handlers): exit 130, the one
    `interrupted` line, no traceback."""
    proc, gate = _held(standin, _corpus(tmp_path, "bravo", 2))
    faults = Faults(s3)
    try:
        faults.hang()
        gate.opened.set()
        time.sleep(3)  # the run is now waiting on the hung store
        deadline = time.monotonic() + DEADLINE
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGTERM)  # as a supervisor that insists would
            time.sleep(0.3)
        code, _, err = _finish(proc)
    finally:
        faults.resume()
    assert code == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "interrupted" in err
