"""Two homes sharing one store (`LOCALGPT_DB` on a local path, or one `s3://` URI): the
ingest lock and the manifest live with the store, so their runs exclude each other and
see one manifest. The S3 half runs against a real S3-compatible server on loopback
(moto's, from the test extra), started here on a free port."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli import ROOT, run
from tests.kb import paragraph
from tests.s3server import serving
from tests.standin import StandIn, hashed_embeddings

BUCKET = "kb-shared"


def _corpus(root: Path, name: str, n: int) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"{name}{i}.md").write_text(f"# {name} {i}\n\n{paragraph(i + 10 * n)}\n")
    return folder


def _start(home_dir: Path, db: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "localgpt_cli", "ingest", *args, "--json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "LOCALGPT_HOME": str(home_dir), "LOCALGPT_DB": db}, cwd=ROOT,
    )  # fmt: skip


def _finish(proc: subprocess.Popen) -> tuple[int, list[dict], str]:
    out, err = proc.communicate(timeout=180)
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def _summary(records: list[dict]) -> dict:
    (summary,) = [r for r in records if r["type"] == "summary"]
    return summary


class _Gate:
    """An embedder that holds every request until opened: the run that reaches it first
    is held with the lock taken, for as long as the test needs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.entered.set()
        assert self.opened.wait(120), "the test never opened the gate"
        return hashed_embeddings(texts, 768)


def _stored(db: str) -> dict[str, bool]:
    """Every stored chunk of the shared store: path -> all its chunks have a vector."""
    from localgpt_cli.rag.store import open_store

    table = open_store(db).collection("default").table.to_arrow()
    out: dict[str, bool] = {}
    for row in table.select(["path", "vector"]).to_pylist():
        out[row["path"]] = out.get(row["path"], True) and row["vector"] is not None
    return out


def _two_homes_one_store(
    standin: StandIn, tmp_path: Path, db: str, where: str, waiting: Callable[[int], bool]
) -> None:
    """A holds the lock (its embedding is held); B exits 75 naming `where` and changes
    nothing; C (B again, with --wait-lock) waits for A, then both homes' files are
    stored, with no internal error, and either home's re-run finds nothing to do."""
    gate = _Gate()
    standin.set_embedder("nomic-embed-text", gate)
    docs_a = _corpus(tmp_path, "alpha", 3)
    docs_b = _corpus(tmp_path, "bravo", 3)
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    a = _start(home_a, db, str(docs_a))
    try:
        assert gate.entered.wait(60), "the first run never asked for embeddings"
        b = _start(home_b, db, str(docs_b))
        code, records, err = _finish(b)
        assert code == 75, err
        (error,) = records
        assert error["code"] == "lock_busy" and where in error["message"]
        assert "--wait-lock" in error["message"]
        c = _start(home_b, db, str(docs_b), "--wait-lock", "120")
        deadline = time.monotonic() + 60
        while not waiting(c.pid):  # until C is seen waiting for the lock A holds
            assert c.poll() is None and time.monotonic() < deadline, "C never waited"
            time.sleep(0.1)
    finally:
        gate.opened.set()
    code_a, records_a, err_a = _finish(a)
    code_c, records_c, err_c = _finish(c)
    assert (code_a, code_c) == (0, 0), err_a + err_c
    assert "internal" not in err_a + err_c
    assert _summary(records_a)["added"] == 3 and _summary(records_c)["added"] == 3
    stored = _stored(db)
    assert sorted(Path(p).name for p in stored) == [
        *(f"alpha{i}.md" for i in range(3)), *(f"bravo{i}.md" for i in range(3))
    ]
    assert all(stored.values())  # every chunk has its vector
    for home_dir, docs in ((home_a, docs_a), (home_b, docs_b)):
        code, records, err = _finish(_start(home_dir, db, str(docs)))
        assert code == 0, err
        assert _summary(records)["unchanged"] == 3 and _summary(records)["embed_requests"] == 0


@pytest.mark.slow
def test_two_homes_on_one_local_store_take_turns_and_lose_nothing(standin, tmp_path):
    db = tmp_path / "shared-db"
    lock = db / "_localgpt" / "ingest.lock"

    def waiting(pid: int) -> bool:
        """The process has the lock file open (it polls it with flock until A is done)."""
        fds = Path(f"/proc/{pid}/fd")
        return any(os.path.realpath(fd) == str(lock) for fd in fds.iterdir())

    _two_homes_one_store(standin, tmp_path, str(db), str(lock), waiting)
    # the lock and the manifest are beside the tables, not in either home
    assert (db / "_localgpt" / "manifests" / "default.jsonl").is_file()
    assert not (tmp_path / "home-a" / "manifests").exists()
    assert not (tmp_path / "home-b" / "ingest.lock").exists()


def _home_manifest(home_dir: Path, db: Path) -> Path:
    """Where versions before the sidecar kept a home's manifest of `db`."""
    digest = hashlib.sha256(os.path.abspath(db).encode()).hexdigest()[:12]
    return home_dir / "manifests" / f"default-{digest}.jsonl"


@pytest.mark.slow
def test_manifests_left_in_two_homes_are_merged_into_the_store(standin, tmp_path):
    db = tmp_path / "shared-db"
    docs = {name: _corpus(tmp_path, name, 2) for name in ("alpha", "bravo")}
    homes = {name: tmp_path / f"home-{name}" for name in docs}
    for name in docs:
        code, _, err = _finish(_start(homes[name], str(db), str(docs[name])))
        assert code == 0, err
    # Lay it out as an earlier version left it: each home holds the manifest of its files.
    shared = db / "_localgpt" / "manifests" / "default.jsonl"
    header, *lines = shared.read_bytes().splitlines(keepends=True)
    for name in docs:
        old = _home_manifest(homes[name], db)
        old.parent.mkdir(parents=True)
        old.write_bytes(header + b"".join(x for x in lines if f"/{name}/".encode() in x))
    shared.unlink()
    # a read-only command already sees what the home's manifest knows, and moves nothing
    listed = run("docs", "list", "--json",
                 env={"LOCALGPT_HOME": str(homes["bravo"]), "LOCALGPT_DB": str(db)})  # fmt: skip
    assert listed.exit_code == 0, listed.stderr
    assert [r["ingested_at"] is not None for r in listed.records()] == [False, False, True, True]
    assert _home_manifest(homes["bravo"], db).exists() and not shared.exists()
    calls = standin.embed_calls
    for name in docs:
        code, records, err = _finish(_start(homes[name], str(db), str(docs[name])))
        assert code == 0, err
        assert _summary(records)["unchanged"] == 2 and _summary(records)["added"] == 0
        assert not _home_manifest(homes[name], db).exists()
    assert standin.embed_calls == calls  # nothing was embedded again
    assert sorted(shared.read_bytes().splitlines()[1:]) == sorted(x.rstrip() for x in lines)


# --- against an S3-compatible server ------------------------------------------------------


@pytest.fixture
def s3_server(isolated_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on a free loopback port, with a bucket, and the AWS_* environment
    that points LanceDB and localgpt at it; yields the endpoint URL."""
    with serving(tmp_path / "moto.log", monkeypatch, BUCKET) as server:
        yield server.endpoint


def _s3():
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])


def _lease_refusals(log: Path) -> list[str]:
    """The server's log lines of lease writes refused with 412 (the lease was held)."""
    return [
        line for line in log.read_text(errors="replace").splitlines()
        if f"PUT /{BUCKET}/{LEASE}" in line and '" 412 ' in line
    ]  # fmt: skip


def _keys() -> list[str]:
    return sorted(o["Key"] for o in _s3().list_objects_v2(Bucket=BUCKET).get("Contents", []))


LEASE = "kb/_localgpt/ingest.lease"


def _released() -> bool:
    """The lease object says it was released (what a holder leaves on its way out)."""
    body = _s3().get_object(Bucket=BUCKET, Key=LEASE)["Body"].read()
    return bool(json.loads(body).get("released"))


@pytest.mark.slow
def test_two_homes_on_one_s3_store_take_turns_through_a_lease(s3_server, standin, tmp_path):
    db = f"s3://{BUCKET}/kb"
    log = tmp_path / "moto.log"
    refusals = len(_lease_refusals(log))

    def waiting(pid: int) -> bool:
        """A conditional put of the lease was refused once more than B's: C's."""
        return len(_lease_refusals(log)) > refusals + 1

    _two_homes_one_store(standin, tmp_path, db, f"s3://{BUCKET}/{LEASE}", waiting)
    keys = _keys()
    assert "kb/_localgpt/manifests/default.jsonl" in keys
    assert _released()  # by the last run
    assert not (tmp_path / "home-a").exists()  # nothing of the store is kept in a home
    # a third machine sees the same manifest
    docs_a = tmp_path / "alpha"
    code, records, err = _finish(_start(tmp_path / "home-c", db, str(docs_a)))
    assert code == 0, err
    assert _summary(records)["unchanged"] == 3


@pytest.mark.slow
def test_a_live_lease_refuses_and_an_expired_one_is_taken_over(s3_server, standin, tmp_path):
    db = f"s3://{BUCKET}/kb"
    docs = _corpus(tmp_path, "alpha", 2)
    s3 = _s3()
    s3.put_object(Bucket=BUCKET, Key=LEASE, Body=b'{"holder": "ghost pid 7", "ttl": 3600}')
    code, records, err = _finish(_start(tmp_path / "home", db, str(docs)))
    assert code == 75, err
    assert "ghost pid 7" in records[0]["message"] and standin.embed_calls == 0
    # its holder died: the lease expires by the server's clock, and the next run takes it
    s3.put_object(Bucket=BUCKET, Key=LEASE, Body=b'{"holder": "ghost pid 7", "ttl": 1}')
    time.sleep(2.5)
    code, records, err = _finish(_start(tmp_path / "home", db, str(docs)))
    assert code == 0, err
    assert _summary(records)["added"] == 2
    assert _released()


def test_a_run_whose_lease_was_taken_over_stops_before_writing(s3_server):
    """A holder that stalled past its TTL and was overtaken finds out at its next
    renewal: its write check and the end of its block raise lease_lost (exit 75)."""
    from localgpt_cli.errors import LockBusy
    from localgpt_cli.rag.lease import hold_lease
    from localgpt_cli.rag.s3 import S3Client

    client = S3Client.from_env(BUCKET)
    with pytest.raises(LockBusy) as ended, hold_lease(client, LEASE, ttl=3) as check:
        check()  # held: nothing to say
        _s3().put_object(Bucket=BUCKET, Key=LEASE, Body=b'{"holder": "usurper pid 9"}')
        deadline = time.monotonic() + 15  # the next renewal (every ttl/3 s) meets its ETag
        while True:
            try:
                check()
            except LockBusy as exc:
                assert exc.code == "lease_lost" and exc.exit_code == 75
                break
            assert time.monotonic() < deadline, "the lost lease went unnoticed"
            time.sleep(0.1)
    assert ended.value.code == "lease_lost"
    body = _s3().get_object(Bucket=BUCKET, Key=LEASE)["Body"].read()
    assert b"usurper" in body  # the usurper's lease was left alone


def test_the_manifest_object_is_only_written_over_the_version_read(s3_server):
    from localgpt_cli.errors import LockBusy
    from localgpt_cli.rag.manifest import OK, Entry, open_manifest

    def entry(name: str) -> Entry:
        return Entry(f"/notes/{name}", name, 1, 1, "sha", "text", 1, OK, "800/120", "now")

    db = f"s3://{BUCKET}/kb"
    mine = open_manifest(db, Path("/nonexistent-home"), "default")
    theirs = open_manifest(db, Path("/nonexistent-home"), "default")
    theirs.put(entry("theirs.md"))
    theirs.compact()  # they took the lease over and saved first
    mine.put(entry("mine.md"))
    with pytest.raises(LockBusy) as lost:
        mine.compact()
    assert lost.value.code == "lease_lost" and "was changed by another run" in lost.value.message
    saved = open_manifest(db, Path("/nonexistent-home"), "default")
    assert list(saved.entries) == ["/notes/theirs.md"]
    saved.put(entry("later.md"))
    saved.compact()  # a writer that read the current version saves normally
    assert len(open_manifest(db, Path("/nonexistent-home"), "default").entries) == 2


def test_conditional_puts_are_refused_by_the_server_with_412(s3_server, tmp_path):
    """The lease's two conditional puts, through obstore against moto: create-only over an
    existing object and update-if-ETag with a stale ETag are refused by the server (412
    in its log), change nothing, and are PreconditionFailed here."""
    from localgpt_cli.rag.s3 import PreconditionFailed, S3Client

    client = S3Client.from_env(BUCKET)
    first = client.put("kb/probe", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        client.put("kb/probe", b"two", if_none_match=True)
    second = client.put("kb/probe", b"three", if_match=first)
    with pytest.raises(PreconditionFailed):
        client.put("kb/probe", b"four", if_match=first)  # stale: the object moved on
    found = client.get("kb/probe")
    assert found is not None and (found.body, found.etag) == (b"three", second)
    refused = [line for line in (tmp_path / "moto.log").read_text().splitlines()
               if "PUT /kb-shared/kb/probe" in line and '" 412 ' in line]  # fmt: skip
    assert len(refused) == 2
    assert client.get("kb/none") is None
