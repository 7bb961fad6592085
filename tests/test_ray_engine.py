"""`ingest --engine ray` on a real Ray cluster started here: a head on loopback (`ray start
--head`, once for the module) joined with --address, and a Ray instance started inside the
CLI process when no address is given. The Ollama stand-in embeds; the stores are a folder
and moto's S3 server (tests/s3server.py).

What is checked is what a user sees: the NDJSON records, the exit code, and what is stored
afterwards (rows, vectors, the manifest), compared with the plain engine's."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import ROOT, Result, run
from tests.faults import Faults, bounded, children
from tests.kb import paragraph
from tests.pty_run import run_on_pty
from tests.rayhead import RAY_ENV, RayHead, cmdline
from tests.requires import unavailable
from tests.s3server import free_port, serving
from tests.standin import StandIn, hashed_embeddings

pytestmark = pytest.mark.timeout(600)


def _need_ray() -> None:
    try:
        import lance_ray  # noqa: F401
        import ray  # noqa: F401
    except ImportError as exc:
        unavailable(f"the [ray] extra is not installed ({exc}): pip install -e '.[test]'")


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHead]:
    """A Ray head on loopback with 2 CPUs for the module (tests/rayhead.py); a test that
    kills it starts it again at the same address before it ends."""
    _need_ray()
    cluster = RayHead(tmp_path_factory.mktemp("ray"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kb(tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A corpus of markdown files, the stand-in's address, and a fresh home per engine."""
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        text = f"# Note {i}\n\n" + "\n\n".join(paragraph(i * 10 + j, 40) for j in range(3))
        (corpus / f"note{i}.md").write_text(text + "\n")
    return {"corpus": corpus, "host": standin.url, "tmp": tmp_path, "standin": standin}


def _ingest(kb: dict[str, Any], home: str, *args: str, db: str | None = None) -> Result:
    env = {"LOCALGPT_HOME": str(kb["tmp"] / home), "PYTHONPATH": str(ROOT)}
    if db:
        env["LOCALGPT_DB"] = db
    return run("--host", kb["host"], "ingest", str(kb["corpus"]), "--json", *args,
               env=env, timeout=400)  # fmt: skip


def _summary(result: Result) -> dict[str, Any]:
    # stderr may hold Ray's own log lines (its C++ core writes some there), never ours.
    assert "Traceback" not in result.stderr and "localgpt:" not in result.stderr or (
        result.exit_code != 0
    ), result.stderr[-2000:]
    return [r for r in result.records() if r["type"] == "summary"][0]


def _documents(result: Result) -> list[tuple[str, str, str, int]]:
    return sorted(
        (r["path"], r["status"], r["document_id"], r.get("chunks", 0))
        for r in result.records()
        if r["type"] == "document"
    )


def _stored(db: str) -> dict[str, tuple[str, str, str, Any]]:
    """chunk id -> (document id, path, text, vector) of every stored row."""
    from localgpt_cli.rag.store import open_store

    table = open_store(db).collection("default").table.to_arrow()
    rows = table.select(["chunk_id", "document_id", "path", "text", "vector"]).to_pylist()
    return {r["chunk_id"]: (r["document_id"], r["path"], r["text"], r["vector"]) for r in rows}


def _manifest(db: str, home: Path) -> dict[str, tuple[Any, ...]]:
    from localgpt_cli.rag.manifest import open_manifest

    entries = open_manifest(db, home, "default").entries
    return {
        p: (e.document_id, e.sha256, e.chunks, e.status, e.options, e.type)
        for p, e in entries.items()
    }


def _same_store(a: str, b: str) -> None:
    import numpy as np

    left, right = _stored(a), _stored(b)
    assert sorted(left) == sorted(right)
    for chunk_id, (doc, path, text, vector) in left.items():
        assert right[chunk_id][:3] == (doc, path, text)
        assert np.allclose(vector, right[chunk_id][3], atol=1e-5)


def test_same_result_as_the_plain_engine_and_mixed_use(head: RayHead, kb: dict[str, Any]) -> None:
    address = head.address
    plain_db, ray_db = str(kb["tmp"] / "plain" / "lancedb"), str(kb["tmp"] / "ray" / "lancedb")
    plain = _ingest(kb, "plain")
    by_ray = _ingest(kb, "ray", "--engine", "ray", "--address", address)
    assert (plain.exit_code, by_ray.exit_code) == (0, 0), by_ray.stderr[-2000:]
    assert _documents(plain) == _documents(by_ray)
    assert _summary(by_ray)["added"] == 6 and _summary(by_ray)["embedded"] > 0
    _same_store(plain_db, ray_db)
    assert _manifest(plain_db, kb["tmp"] / "plain") == _manifest(ray_db, kb["tmp"] / "ray")
    # An unchanged rerun embeds nothing, on either engine (and joins no cluster).
    for home, args in (("plain", ()), ("ray", ("--engine", "ray", "--address", address))):
        again = _ingest(kb, home, *args)
        assert again.exit_code == 0 and _summary(again)["embedded"] == 0
        assert _summary(again)["unchanged"] == 6
    # Mixed use: each collection is updated by the other engine.
    (kb["corpus"] / "note1.md").write_text("# Note 1\n\n" + paragraph(99, 40) + "\n")
    (kb["corpus"] / "note9.md").write_text("# Note 9\n\n" + paragraph(77, 40) + "\n")
    (kb["corpus"] / "note2.md").unlink()
    args = ("--prune",)
    plain_updated = _ingest(kb, "ray", *args)  # the ray-built one, by the plain engine
    ray_updated = _ingest(kb, "plain", *args, "--engine", "ray", "--address", address)
    assert (plain_updated.exit_code, ray_updated.exit_code) == (0, 0), ray_updated.stderr
    assert _documents(plain_updated) == _documents(ray_updated)
    statuses = {Path(p).name: s for p, s, _, _ in _documents(ray_updated)}
    assert statuses == {"note1.md": "updated", "note9.md": "added", "note2.md": "removed"}
    _same_store(plain_db, ray_db)
    assert _manifest(plain_db, kb["tmp"] / "plain") == _manifest(ray_db, kb["tmp"] / "ray")


def test_ray_instance_in_process_against_s3(
    kb: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _need_ray()
    with serving(kb["tmp"] / "moto.log", monkeypatch, "kb-ray"):
        db = "s3://kb-ray/store"
        by_ray = _ingest(kb, "s3", "--engine", "ray", db=db)
        assert by_ray.exit_code == 0, by_ray.stderr[-2000:]
        plain = _ingest(kb, "plain")
        assert _documents(plain) == _documents(by_ray)
        _same_store(str(kb["tmp"] / "plain" / "lancedb"), db)


def _embedding_actors(head: RayHead) -> list[int]:
    """The pids of the cluster's embedding actors (their process title names the stage)."""
    return [pid for pid in head.pids() if "MapBatches(BoundEmbed)" in cmdline(pid)]


def _slow_embedder(entered: threading.Event, seconds: float, at: int = 1) -> Any:
    """An embedder taking `seconds` a request, setting `entered` in request number `at`."""
    calls = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        if len(calls) >= at:
            entered.set()
        time.sleep(seconds)
        return hashed_embeddings(texts, 768)

    return embed


def test_a_killed_worker_fails_its_files_and_the_next_run_completes_them(
    head: RayHead, kb: dict[str, Any]
) -> None:
    address = head.address
    entered = threading.Event()
    # The first request is the driver's own (the new collection's vector dimension); the
    # second comes from an actor, killed while it waits for the answer.
    kb["standin"].set_embedder("nomic-embed-text", _slow_embedder(entered, 2.0, at=2))

    def kill_an_actor() -> None:
        assert entered.wait(300), "no embedding request came"
        for pid in _embedding_actors(head):
            os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_an_actor)
    killer.start()
    first = _ingest(kb, "ray", "--engine", "ray", "--address", address)
    killer.join()
    assert first.exit_code == 5, first.stderr[-2000:]
    assert all(line.startswith("{") for line in first.stdout.splitlines()), first.stdout
    lost = [r for r in first.records() if r.get("code") == "worker_lost"]
    assert lost and all(r["status"] == "failed" for r in lost)
    assert "file(s) failed to ingest" in first.stderr
    kb["standin"].set_embedder("nomic-embed-text", lambda t: hashed_embeddings(t, 768))
    second = _ingest(kb, "ray", "--engine", "ray", "--address", address)
    assert second.exit_code == 0, second.stderr[-2000:]
    assert sorted(r["path"] for r in lost) == sorted(
        r["path"] for r in second.records() if r["type"] == "document"
    )
    stored = {doc for doc, *_ in _stored(str(kb["tmp"] / "ray" / "lancedb")).values()}
    assert len(stored) == 6


def test_ctrl_c_stops_the_run_and_leaves_nothing_half_written(
    head: RayHead, kb: dict[str, Any]
) -> None:
    address = head.address
    entered = threading.Event()
    kb["standin"].set_embedder("nomic-embed-text", _slow_embedder(entered, 1.0))
    home = kb["tmp"] / "pty"
    code, out = run_on_pty(
        ["--host", kb["host"], "ingest", str(kb["corpus"]), "--json", "--engine", "ray",
         "--address", address],
        answers=[(b'"type":"document"', b"\x03")],
        env={"LOCALGPT_HOME": str(home)}, timeout=400,
    )  # fmt: skip
    assert code == 130, out[-2000:]
    assert b"interrupted" in out and b"Traceback" not in out
    db = str(home / "lancedb")
    manifest = _manifest(db, home)
    rows: dict[str, int] = {}
    for doc, *_ in _stored(db).values():
        rows[doc] = rows.get(doc, 0) + 1
    assert 0 < len(manifest) < 6
    assert rows == {e[0]: e[2] for e in manifest.values()}  # each stored document is whole


def test_no_cluster_at_the_address_is_one_line_and_exit_3(kb: dict[str, Any]) -> None:
    _need_ray()
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "LOCALGPT_HOME": str(kb["tmp"] / "none"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "localgpt_cli", "--host", kb["host"], "ingest",
           str(kb["corpus"]), "--engine", "ray", "--address", address]  # fmt: skip
    result = bounded(cmd, 60, env=env, cwd=str(ROOT))
    assert result.returncode == 3
    assert result.stderr.count("\n") <= 2 and f"No Ray cluster at {address}" in result.stderr
    assert not (kb["tmp"] / "none" / "lancedb" / "default.lance" / "data").exists()


def test_a_hung_cluster_is_bounded_by_the_deadline(head: RayHead, kb: dict[str, Any]) -> None:
    address = head.address
    assert head.proc is not None
    stopped = [p for p in children(head.proc.pid) if any(
        name in cmdline(p) for name in ("gcs_server", "raylet"))]  # fmt: skip
    env = {**os.environ, "LOCALGPT_HOME": str(kb["tmp"] / "hung"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "localgpt_cli", "--host", kb["host"], "ingest",
           str(kb["corpus"]), "--engine", "ray", "--address", address, "--ray-timeout", "15"]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        result = bounded(cmd, 60, env=env, cwd=str(ROOT))
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    assert result.returncode == 3, result.stderr[-2000:]
    # Ray's own log may come first; the run's last word is one line naming the cluster.
    assert f"The Ray cluster at {address} did not answer within 15 s" in (
        result.stderr.strip().splitlines()[-1]
    )


def test_missing_extra_is_one_line(tmp_path: Path) -> None:
    """Without ray importable the engine says which extra to install (exit 6, the
    project's missing-extra convention); a stub module named `ray` that fails to import
    stands for an uninstalled one."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError('No module named ray')\n")
    (tmp_path / "a.md").write_text("# A\n\nSome text.\n")
    env = {"PYTHONPATH": f"{shadow}:{ROOT}", "LOCALGPT_HOME": str(tmp_path / "h")}
    result = run("ingest", str(tmp_path / "a.md"), "--engine", "ray", env=env)
    assert result.exit_code == 6
    assert "pip install -e '.[ray]'" in result.stderr and "Traceback" not in result.stderr



@pytest.fixture
def crashing(head: RayHead) -> Iterator[RayHead]:
    """The module's head, for a test that kills it: started again at its address after
    the test whatever became of it, so the tests after it find a cluster there."""
    yield head
    if not head.up():
        Faults(head).kill()
        head.gone()
        head.start()


def _ray_run(
    kb: dict[str, Any], home: Path, address: str, *args: str, deadline: float = 60
) -> Result:
    """`ingest --engine ray --address ADDRESS` under a deadline: a run that outlives it
    (by the 10 s `bounded` allows) fails the test."""
    env = {**os.environ, "LOCALGPT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "localgpt_cli", "--host", kb["host"], "ingest",
           str(kb["corpus"]), "--json", "--engine", "ray", "--address", address, *args]  # fmt: skip
    done = bounded(cmd, deadline, env=env, cwd=str(ROOT))
    return Result(done.returncode, done.stdout, done.stderr)


def _last_line(result: Result) -> str:
    """The run's last word on stderr (Ray's own log lines may come before it)."""
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert all(line.startswith("{") for line in result.stdout.splitlines()), result.stdout
    return result.stderr.strip().splitlines()[-1]


def test_the_head_killed_mid_run_then_started_again_at_the_same_address(
    crashing: RayHead, kb: dict[str, Any]
) -> None:
    """The head crashes (all its processes SIGKILLed) while the run waits for an
    embedding: the run ends within --ray-timeout, exit 3, one line naming the cluster,
    and the stored rows and the manifest are as before; with the head down a run is
    refused at once; a head started again at the same address completes the run."""
    head, home = crashing, kb["tmp"] / "crash"
    db = str(home / "lancedb")
    assert _ingest(kb, "crash").exit_code == 0  # the stored collection (plain engine)
    rows, manifest = _stored(db), _manifest(db, home)
    changed = kb["corpus"] / "note1.md"
    changed.write_text("# Note 1\n\n" + paragraph(99, 40) + "\n")
    entered = threading.Event()
    kb["standin"].set_embedder("nomic-embed-text", _slow_embedder(entered, 2.0))

    def crash() -> None:
        if entered.wait(120):  # an actor's request: the run is under way on the cluster
            Faults(head).kill()

    killer = threading.Thread(target=crash, daemon=True)
    killer.start()
    # The run's clock starts with the pipeline; 30 s leaves the actors time to start on
    # a loaded machine, and 60 s more is Ray's import and joining the cluster.
    mid_run = _ray_run(kb, home, head.address, "--ray-timeout", "30", deadline=90)
    killer.join()
    assert entered.is_set(), f"the run ended before the crash: {mid_run.stderr[-2000:]}"
    assert not head.up()
    assert mid_run.exit_code == 3, mid_run.stderr[-2000:]
    assert _last_line(mid_run) == (
        f"localgpt: error: The Ray cluster at {head.address} sent nothing for 30 s. What "
        "was committed is kept; run again once the cluster answers (ray status), or raise "
        "--ray-timeout."
    )
    assert mid_run.records()[-1]["code"] == "ray_unreachable"
    assert (_stored(db), _manifest(db, home)) == (rows, manifest)
    head.gone()
    down = _ray_run(kb, home, head.address)
    assert down.exit_code == 3 and down.stderr.count("\n") == 1, down.stderr[-2000:]
    assert _last_line(down).startswith(
        f"localgpt: error: No Ray cluster at {head.address}: Connection refused."
    )
    assert (_stored(db), _manifest(db, home)) == (rows, manifest)
    kb["standin"].set_embedder("nomic-embed-text", lambda t: hashed_embeddings(t, 768))
    head.start()
    again = _ray_run(kb, home, head.address)
    assert again.exit_code == 0, again.stderr[-2000:]
    assert [(Path(p).name, s) for p, s, *_ in _documents(again)] == [("note1.md", "updated")]
    after, note1 = _stored(db), manifest[str(changed)][0]
    assert {k: v for k, v in after.items() if v[0] != note1} == {
        k: v for k, v in rows.items() if v[0] != note1
    }  # nothing else lost or changed
    entries = _manifest(db, home)
    assert entries[str(changed)][1] == hashlib.sha256(changed.read_bytes()).hexdigest()
    assert sum(v[0] == note1 for v in after.values()) == entries[str(changed)][2] > 0
    assert {p: e for p, e in entries.items() if p != str(changed)} == {
        p: e for p, e in manifest.items() if p != str(changed)
    }
    unchanged = _ingest(kb, "crash", "--engine", "ray", "--address", head.address)
    assert unchanged.exit_code == 0 and _summary(unchanged)["embedded"] == 0
