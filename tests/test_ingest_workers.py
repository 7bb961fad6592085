"""`localgpt ingest --workers N`: files parsed by worker processes give the same events,
rows and manifest as --workers 1; a file that fails, or whose worker is killed, fails
alone (exit 5) and the next run completes it; Ctrl-C on a real terminal stops the pool,
leaves no worker behind and loses nothing. Through the CLI, against the stand-in."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli import ROOT, run
from tests.kb import paragraph, snapshot
from tests.pdfgen import make_pdf

WORKER = b"localgpt_cli.rag.ingest.worker"
FILES = 40  # of ~26 KB: the corpus passes the pool's 1 MB threshold (pool.POOL_MIN_BYTES)
VOLATILE = ("ms", "embed_ms", "optimize_ms")
# Few, small vectors: the stand-in's embedding time is not what these tests are about.
LEAN = ("-m", "all-minilm", "--chunk-size", "6000")


def _corpus(root: Path, broken: bool = False) -> Path:
    """FILES Markdown notes and a PDF (and, if `broken`, an empty file, a binary one and
    a corrupt PDF that fails)."""
    root.mkdir(parents=True)
    for i in range(FILES):
        body = "\n\n".join(paragraph(i * 50 + n, words=60) for n in range(50))
        (root / f"note{i:02}.md").write_text(f"# Note {i}\n\n{body}\n")
    make_pdf(root / "manual.pdf", ["The zebra crossing manual.", "Quasar observations."])
    if broken:
        (root / "empty.txt").write_text("")
        (root / "blob.txt").write_bytes(bytes(range(256)) * 4)
        (root / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage")
    return root


def _workers(pid: int) -> list[int]:
    """The worker processes `pid` started (still there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and WORKER in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _ingest(corpus: Path, home: Path, *args: str) -> tuple[int, list[dict], list[int]]:
    """`localgpt ingest CORPUS --json ARGS` as a process: exit code, records, and the
    worker processes seen while it ran."""
    cmd = [sys.executable, "-m", "localgpt_cli", "ingest", str(corpus), "--json", *LEAN, *args]
    env = {**os.environ, "LOCALGPT_HOME": str(home)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT, env=env)  # fmt: skip
    seen: set[int] = set()
    while proc.poll() is None:
        seen.update(_workers(proc.pid))
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err, err
    return proc.returncode, [json.loads(line) for line in out.splitlines()], sorted(seen)


def _stable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]


def _manifest(home: Path) -> list[dict]:
    path = home / "lancedb" / "_localgpt" / "manifests" / "default.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    entries = [{k: v for k, v in r.items() if k != "ingested_at"} for r in rows if "path" in r]
    return sorted(entries, key=lambda e: e["path"])


def _rows(home: Path) -> list[dict]:
    """Every stored row, every column (the vector as a list), by chunk id; each row's
    `text_hash` checked against the store's own definition of it (`embed_hash`): the
    workers hash the embedding inputs, the ingest process no longer does."""
    from localgpt_cli.rag.store import embed_hash, open_store
    from localgpt_cli.rag.store.rows import row_chunk

    table = open_store(home / "lancedb").collection("default").table.to_arrow()
    rows = sorted(table.to_pylist(), key=lambda r: r["chunk_id"])
    for row in rows:
        assert row["text_hash"] == embed_hash(row_chunk(row)), row["chunk_id"]
        row["vector"] = None if row.get("vector") is None else list(row["vector"])
    return rows


def test_two_workers_give_the_same_events_rows_and_manifest_as_one(standin, tmp_path):
    corpus = _corpus(tmp_path / "corpus", broken=True)
    code1, one, pool1 = _ingest(corpus, tmp_path / "h1", "--workers", "1")
    code2, two, pool2 = _ingest(corpus, tmp_path / "h2", "--workers", "2")
    assert pool1 == [] and len(pool2) >= 2  # the pool ran, with two workers at least
    # the corrupt PDF fails alone, in both, and the run says so with exit 5
    assert code1 == code2 == 5
    assert _stable(two) == _stable(one)  # same events, same order
    failed = [r for r in two if r["type"] == "document" and r["status"] == "failed"]
    assert [Path(r["path"]).name for r in failed] == ["corrupt.pdf"]
    (summary,) = [r for r in two if r["type"] == "summary"]
    assert summary["added"] == FILES + 1 and summary["skipped"] == 2
    rows = _rows(tmp_path / "h1")
    assert all(r["vector"] is not None for r in rows)
    assert any(r["title"] and r["ordinal"] for r in rows)  # titled inputs, hashed as such
    assert _rows(tmp_path / "h2") == rows  # every column, vectors included
    assert _manifest(tmp_path / "h2") == _manifest(tmp_path / "h1")


def test_a_killed_worker_fails_its_file_alone_and_the_next_run_completes_it(standin, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    home = tmp_path / "h"
    cmd = [sys.executable, "-m", "localgpt_cli", "ingest", str(corpus), "--json", *LEAN,
           "--workers", "2"]  # fmt: skip
    env = {**os.environ, "LOCALGPT_HOME": str(home)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT, env=env)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (workers := _workers(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers, "no worker process started"
    victim = workers[0]
    # Stopped, it keeps the files sent to it (the run waits for the first of them); then
    # killed while it holds them, as the OOM killer would.
    os.kill(victim, signal.SIGSTOP)
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    assert b"Traceback" not in err
    records = [json.loads(line) for line in out.splitlines()]
    failed = [r for r in records if r["type"] == "document" and r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["code"] == "worker_died"
    assert "killed by SIGKILL" in failed[0]["message"]
    (summary,) = [r for r in records if r["type"] == "summary"]
    assert summary["added"] == FILES and summary["failed"] == 1  # every other file
    assert not _alive(victim)

    again = run("ingest", str(corpus), "--json", *LEAN, env={"LOCALGPT_HOME": str(home)})
    assert again.exit_code == 0, again.stderr
    (redo,) = [r for r in again.records() if r["type"] == "document"]
    assert redo["path"] == failed[0]["path"] and redo["status"] == "added"
    assert len({row[1] for row in snapshot(home)}) == FILES + 1


def test_ctrl_c_stops_the_pool_leaves_no_worker_and_loses_nothing(standin, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    home = tmp_path / "h"
    standin.embed_delay = 0.5  # a slow embedding server: the run is still going at Ctrl-C
    env = {**os.environ, "LOCALGPT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    args = ["-m", "localgpt_cli", "ingest", str(corpus), "--json", *LEAN, "--workers", "2",
            "--batch-size", "8"]  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # child: the ingest, on the terminal as a person runs it
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, *args], env)
    out, seen, interrupted = b"", set(), False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        seen.update(_workers(pid))
        if not interrupted and seen and b'"type":"document"' in out:
            os.write(fd, b"\x03")  # Ctrl-C, as typed: the terminal sends SIGINT
            interrupted = True
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the ingest has gone
                break
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert interrupted, out[-500:]
    assert os.waitstatus_to_exitcode(status) == 130, out[-500:]
    assert b"interrupted" in out and b"Traceback" not in out
    assert seen and not any(_alive(w) for w in seen)  # no orphan worker
    text = out.decode().replace("\r\n", "\n")
    committed = {r["path"] for line in text.splitlines() if line.startswith('{"type":"document"')
                 for r in [json.loads(line)]}  # fmt: skip
    assert committed and len(committed) < FILES + 1  # stopped mid-run

    standin.embed_delay = 0.0
    listed = run("docs", "list", "--json", env={"LOCALGPT_HOME": str(home)})
    assert listed.exit_code == 0, listed.stderr  # the store opens
    kept = {r["path"] for r in listed.records() if r.get("type") == "document"}
    assert committed <= kept  # what was reported committed is there
    again = run("ingest", str(corpus), "--json", *LEAN, env={"LOCALGPT_HOME": str(home)})
    assert again.exit_code == 0, again.stderr
    summary = again.records()[-1]
    assert summary["unchanged"] >= len(committed)  # not done twice
    assert summary["added"] + summary["unchanged"] == FILES + 1
    assert len({row[1] for row in snapshot(home)}) == FILES + 1


def test_embedding_requests_go_two_at_once_and_store_the_same(standin, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(12):
        (corpus / f"n{i}.md").write_text(f"# Note {i}\n\n{paragraph(i, words=40)}\n")
    standin.embed_delay = 0.3  # each request is slow: the run would wait for each in turn
    config = tmp_path / "one.toml"
    config.write_text("[ingest]\nconcurrency = 1\n")
    one = run("ingest", str(corpus), "--json", "--batch-size", "2",
              env={"LOCALGPT_HOME": str(tmp_path / "h1"), "LOCALGPT_CONFIG": str(config)})
    assert one.exit_code == 0, one.stderr
    assert standin.embeds_at_once == 1
    two = run("ingest", str(corpus), "--json", "--batch-size", "2",
              env={"LOCALGPT_HOME": str(tmp_path / "h2")})  # the default: 2 in flight
    assert two.exit_code == 0, two.stderr
    assert standin.embeds_at_once == 2
    assert _stable(two.records()) == _stable(one.records())
    assert two.records()[-1]["embed_requests"] == one.records()[-1]["embed_requests"] == 6
    assert snapshot(tmp_path / "h2") == snapshot(tmp_path / "h1")
