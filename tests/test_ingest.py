"""`localgpt ingest` end to end against the Ollama stand-in: what is stored, what is printed,
exit codes, incrementality, the lock, Ollama down, failures, and crash consistency."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli import ROOT, invoke, run
from tests.kb import (
    embed_bodies,
    home,
    long_markdown,
    make_corpus,
    paragraph,
    snapshot,
    table_version,
)
from tests.standin import StandIn, hashed_embeddings


def records_of(result, kind: str = "document") -> list[dict]:
    return [r for r in result.records() if r["type"] == kind]


def summary_of(result) -> dict:
    (summary,) = records_of(result, "summary")
    return summary


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "corpus")


def test_ingest_mixed_corpus_stores_every_type_with_metadata(standin, corpus):
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0, r.stderr
    docs = {Path(d["path"]).name: d for d in records_of(r)}
    assert set(docs) == {"vpn.md", "retry.py", "todo.txt", "manual.pdf"}
    assert all(d["status"] == "added" and d["chunks"] >= 1 for d in docs.values())
    summary = summary_of(r)
    assert summary["added"] == 4 and summary["failed"] == 0
    assert summary["pending_embeddings"] == 0
    assert summary["chunks"] == sum(d["chunks"] for d in docs.values())
    assert r.records()[-1]["type"] == "summary"
    rows = snapshot(home())
    assert len(rows) == summary["chunks"] and all(has_vec for *_, has_vec in rows)
    # the PDF keeps its pages, code its line ranges, markdown its headings
    pdf = invoke("docs", "show", docs["manual.pdf"]["document_id"], "--json").records()
    assert [c["page"] for c in pdf] == [1, 2]
    assert "quasar" in pdf[1]["text"]
    code = invoke("docs", "show", str(corpus / "code" / "retry.py"), "--json").records()
    assert code[0]["line_start"] == 1 and code[-1]["line_end"] >= 9
    md = invoke("docs", "show", str(corpus / "vpn.md"), "--json").records()
    assert any(c["heading"] == "VPN > Troubleshooting" for c in md)


def test_documents_are_embedded_with_the_model_prefix_in_full_batches(standin, tmp_path):
    notes = tmp_path / "many"
    notes.mkdir()
    for i in range(7):
        (notes / f"n{i}.md").write_text(long_markdown(3 + i % 3, first=10 * i, title=f"Note {i}"))
    r = invoke("ingest", str(notes), "--json", "--batch-size", "4")
    assert r.exit_code == 0, r.stderr
    summary = summary_of(r)
    # requests span documents: ceil(new chunks / batch size), not one per file
    assert standin.embed_calls == math.ceil(summary["chunks"] / 4) == summary["embed_requests"]
    inputs = [t for body in embed_bodies(standin) for t in body["input"]]
    assert len(inputs) == summary["chunks"]
    assert all(t.startswith("search_document: ") for t in inputs)
    # full batches but the last one sent (two are in flight at once: they may arrive in
    # either order)
    sizes = sorted((len(b["input"]) for b in embed_bodies(standin)), reverse=True)
    assert sizes[:-1] == [4] * (standin.embed_calls - 1)


def test_rerun_is_idempotent_and_costs_no_embedding(standin, corpus):
    first = invoke("ingest", str(corpus), "--json")
    assert first.exit_code == 0
    calls, version, rows = standin.embed_calls, table_version(home()), snapshot(home())
    again = invoke("ingest", str(corpus), "--json")
    assert again.exit_code == 0
    assert records_of(again) == []
    summary = summary_of(again)
    assert summary["unchanged"] == 4 and summary["added"] == summary["updated"] == 0
    assert standin.embed_calls == calls
    assert table_version(home()) == version  # nothing was written
    assert snapshot(home()) == rows


def test_touched_file_is_unchanged(standin, corpus):
    invoke("ingest", str(corpus))
    calls = standin.embed_calls
    os.utime(corpus / "vpn.md", ns=(1, 10**18))
    r = invoke("ingest", str(corpus), "--json")
    assert records_of(r) == [] and summary_of(r)["unchanged"] == 4
    assert standin.embed_calls == calls


def test_editing_one_paragraph_reembeds_one_or_two_chunks(standin, tmp_path):
    notes = tmp_path / "long"
    notes.mkdir()
    doc = notes / "long.md"
    doc.write_text(long_markdown(24))
    first = invoke("ingest", str(notes), "--json")
    chunks = records_of(first)[0]["chunks"]
    assert chunks >= 8
    inputs = standin.embed_inputs
    doc.write_text(doc.read_text().replace(paragraph(6), paragraph(6).replace("6 ", "6x ", 1)))
    r = invoke("ingest", str(notes), "--json")
    assert r.exit_code == 0
    (rec,) = records_of(r)
    assert rec["status"] == "updated" and rec["chunks"] == chunks
    assert 1 <= standin.embed_inputs - inputs <= 2
    assert rec["reused"] >= chunks - 2
    assert all(has_vec for *_, has_vec in snapshot(home()))


def test_moved_file_keeps_its_document_and_is_not_reembedded(standin, corpus):
    first = invoke("ingest", str(corpus), "--json")
    doc_id = next(d["document_id"] for d in records_of(first) if d["path"].endswith("vpn.md"))
    calls = standin.embed_calls
    (corpus / "archive").mkdir()
    (corpus / "vpn.md").rename(corpus / "archive" / "vpn-old.md")
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0
    (moved,) = records_of(r)
    assert moved["status"] == "moved" and moved["document_id"] == doc_id
    assert moved["from"] == str(corpus / "vpn.md")
    assert moved["path"] == str(corpus / "archive" / "vpn-old.md")
    assert standin.embed_calls == calls
    paths = {row[2] for row in snapshot(home()) if row[1] == doc_id}
    assert paths == {str(corpus / "archive" / "vpn-old.md")}
    assert summary_of(invoke("ingest", str(corpus), "--json"))["unchanged"] == 4


def test_a_file_missing_outside_the_paths_named_is_not_taken_as_moved(standin, tmp_path):
    """On a store shared by two machines, the other machine's files are missing here: a
    file with the same content under this run's paths is added, the other stays."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (there / "vpn.md").write_text("# VPN\n\nReset the VPN with the blue button.\n")
    assert invoke("ingest", str(there)).exit_code == 0
    (there / "vpn.md").rename(here / "vpn.md")  # gone from `there`, as if on another machine
    r = invoke("ingest", str(here), "--json")
    assert r.exit_code == 0, r.stderr
    assert [(d["status"], d["path"]) for d in records_of(r)] == [
        ("added", str(here / "vpn.md"))
    ]
    assert stored_paths() == {str(here / "vpn.md"), str(there / "vpn.md")}


def test_prune_removes_documents_whose_files_are_gone(standin, corpus):
    invoke("ingest", str(corpus))
    (corpus / "todo.txt").unlink()
    kept = invoke("ingest", str(corpus), "--json")
    assert summary_of(kept)["removed"] == 0
    assert any(row[2].endswith("todo.txt") for row in snapshot(home()))
    r = invoke("ingest", str(corpus), "--prune", "--json")
    assert r.exit_code == 0
    (removed,) = records_of(r)
    assert removed["status"] == "removed" and removed["path"] == str(corpus / "todo.txt")
    assert not any(row[2].endswith("todo.txt") for row in snapshot(home()))


def test_prune_forgets_the_file_before_deleting_its_rows(standin, corpus, monkeypatch):
    """Manifest first: a prune stopped between the two leaves rows the manifest does not
    vouch for (the next --prune removes them), never a manifest vouching for gone rows."""
    from localgpt_cli.rag.store.writes import Writes

    invoke("ingest", str(corpus))
    (corpus / "todo.txt").unlink()

    def crash(self, document_ids):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(Writes, "delete_documents", crash)
        assert invoke("ingest", str(corpus), "--prune").exit_code == 130
    manifest = (home() / "lancedb" / "_localgpt" / "manifests" / "default.jsonl").read_text()
    assert str(corpus / "todo.txt") not in [json.loads(line).get("path") for line in
                                            manifest.splitlines()[1:] if line.startswith("{")]
    assert any(row[2].endswith("todo.txt") for row in snapshot(home()))  # rows still there
    r = invoke("ingest", str(corpus), "--prune", "--json")
    assert r.exit_code == 0, r.stderr
    assert not any(row[2].endswith("todo.txt") for row in snapshot(home()))


def test_dry_run_on_a_fresh_home_creates_nothing(standin, corpus):
    r = invoke("ingest", str(corpus), "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert {d["status"] for d in records_of(r)} == {"added"}
    assert all(d["dry_run"] for d in records_of(r))
    assert summary_of(r)["dry_run"] is True
    assert list(home().iterdir()) == []
    assert standin.embed_calls == 0


def test_dry_run_reports_changes_without_making_them(standin, corpus):
    invoke("ingest", str(corpus))
    (corpus / "todo.txt").write_text("Something else entirely.\n")
    (corpus / "manual.pdf").unlink()
    (corpus / "new.md").write_text("# New\n\nA new note.\n")
    manifests = sorted((home() / "lancedb" / "_localgpt" / "manifests").iterdir())
    before = [p.read_bytes() for p in manifests]
    version, calls = table_version(home()), standin.embed_calls
    r = invoke("ingest", str(corpus), "--dry-run", "--prune", "--json")
    assert r.exit_code == 0
    got = {(Path(d["path"]).name, d["status"]) for d in records_of(r)}
    assert got == {("todo.txt", "updated"), ("manual.pdf", "removed"), ("new.md", "added")}
    assert [p.read_bytes() for p in manifests] == before
    assert table_version(home()) == version and standin.embed_calls == calls


def test_piped_output_is_silent_on_success(standin, corpus):
    r = invoke("ingest", str(corpus))
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    path.parent.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, str(os.getpid()).encode())\n"
        "print('locked', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


def test_a_held_lock_exits_75_and_touches_nothing(standin, corpus):
    holder = _hold_lock(home() / "lancedb" / "_localgpt" / "ingest.lock", 30)
    try:
        r = invoke("ingest", str(corpus), "--json")
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 75
    (error,) = r.records()
    assert error["type"] == "error" and error["code"] == "lock_busy"
    assert f"pid {holder.pid}" in error["message"] and "--wait-lock" in error["message"]
    assert [str(p.relative_to(home())) for p in sorted(home().rglob("*"))] == [
        "lancedb", "lancedb/_localgpt", "lancedb/_localgpt/ingest.lock"
    ]
    assert standin.embed_calls == 0


def test_wait_lock_waits_for_the_other_run(standin, corpus):
    holder = _hold_lock(home() / "lancedb" / "_localgpt" / "ingest.lock", 0.5)
    try:
        r = invoke("ingest", str(corpus), "--wait-lock", "10", "--json")
    finally:
        holder.wait()
    assert r.exit_code == 0 and summary_of(r)["added"] == 4


def test_ollama_down_stores_chunks_for_keyword_search_and_the_next_run_embeds_them(
    isolated_env, corpus, monkeypatch
):
    # Named: with Ollama down, a defaulted model would use the local embedder instead.
    r = invoke("ingest", str(corpus), "--json", "-m", "nomic-embed-text")
    assert r.exit_code == 3
    summary = summary_of(r)
    assert summary["added"] == 4
    assert summary["pending_embeddings"] == summary["chunks"] > 0
    assert r.records()[-1]["code"] == "ollama_unreachable"
    assert "embeddings_pending" in r.stderr
    assert all(not has_vec for *_, has_vec in snapshot(home()))
    found = invoke("search", "--mode", "keyword", "wireguard", "--json")
    assert found.exit_code == 0 and found.records()[0]["path"].endswith("vpn.md")
    hybrid = invoke("search", "wireguard", "--json")
    assert hybrid.exit_code == 0 and hybrid.records()[0]["path"].endswith("vpn.md")
    assert "keyword" in hybrid.stderr

    with StandIn() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        again = invoke("ingest", str(corpus), "--json")
        assert again.exit_code == 0, again.stderr
        s = summary_of(again)
        assert s["unchanged"] == 4 and s["pending_embeddings"] == 0
        assert s["embedded"] == summary["chunks"]
        assert server.embed_inputs == summary["chunks"]
    assert all(has_vec for *_, has_vec in snapshot(home()))


def test_a_corrupt_pdf_fails_alone_and_the_rest_is_committed(standin, corpus):
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage\n%%EOF\n")
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 5
    failed = [d for d in records_of(r) if d["status"] == "failed"]
    assert [Path(d["path"]).name for d in failed] == ["broken.pdf"]
    assert "broken.pdf" in failed[0]["message"] and "PDF" in failed[0]["message"]
    assert summary_of(r)["added"] == 4 and summary_of(r)["failed"] == 1
    assert r.records()[-1]["code"] == "partial_failure"
    assert len({row[1] for row in snapshot(home())}) == 4
    listed = invoke("docs", "list", "--json").records()
    assert [d["status"] for d in listed if d["path"].endswith("broken.pdf")] == ["failed"]
    plain = invoke("ingest", str(corpus))  # retried, and reported again
    assert plain.exit_code == 5 and plain.stdout == ""
    assert "broken.pdf" in plain.stderr and "failed to ingest" in plain.stderr


def test_file_size_limit_fails_with_a_clear_message(standin, corpus):
    (corpus / "big.txt").write_text("word " * 600)
    r = invoke("ingest", str(corpus), "--max-file-size", "2k", "--json")
    assert r.exit_code == 5
    (failed,) = [d for d in records_of(r) if d["status"] == "failed"]
    assert failed["code"] == "too_large" and "--max-file-size" in failed["message"]


def test_long_chunks_are_cut_for_embedding_but_stored_whole(standin, tmp_path):
    notes = tmp_path / "wide"
    notes.mkdir()
    text = " ".join(f"w{i}" for i in range(3000))  # ~17,000 characters, one paragraph
    (notes / "wide.txt").write_text(text)
    r = invoke("ingest", str(notes), "--chunk-size", "20000", "--chunk-overlap", "0", "--json")
    assert r.exit_code == 0
    assert "embed_input_truncated" in r.stderr
    (body,) = embed_bodies(standin)
    assert len(body["input"][0]) == 8000
    assert snapshot(home())[0][3] == text


def test_with_ollama_down_each_file_still_says_its_chunks_were_cut(isolated_env, tmp_path):
    # The first file's input is queued and its request finds Ollama down; the later files
    # queue nothing (nothing would be sent) and are counted the same way.
    notes = tmp_path / "wide"
    notes.mkdir()
    for n in range(3):
        (notes / f"wide{n}.txt").write_text(" ".join(f"w{n}x{i}" for i in range(2500)))
    r = invoke("ingest", str(notes), "-m", "nomic-embed-text", "--batch-size", "1",
               "--chunk-size", "20000", "--chunk-overlap", "0", "--json")  # fmt: skip
    assert r.exit_code == 3, r.stderr
    cut = [line for line in r.stderr.splitlines() if "embed_input_truncated" in line]
    assert [f"wide{n}.txt: 1 chunk(s)" in line for n, line in enumerate(cut)] == [True] * 3
    assert summary_of(r)["pending_embeddings"] == 3


def test_model_mismatch_exits_6_with_the_reindex_command(standin, corpus):
    standin.add_model("nomic-embed-text", capabilities=("embedding",), embedding_dim=768)
    standin.add_model("all-minilm", capabilities=("embedding",), embedding_dim=384)
    assert invoke("ingest", str(corpus), "-m", "all-minilm").exit_code == 0
    # no model asked for: the collection's own is used
    calls = standin.embed_calls
    (corpus / "extra.md").write_text("# Extra\n\nMore words.\n")
    assert invoke("ingest", str(corpus)).exit_code == 0
    assert {b["model"] for b in embed_bodies(standin)[calls:]} == {"all-minilm"}
    # all-minilm was trained without task prefixes: none is added
    assert not any(t.startswith("search_") for b in embed_bodies(standin) for t in b["input"])
    r = invoke("ingest", str(corpus), "-m", "nomic-embed-text", "--json")
    assert r.exit_code == 6
    (error,) = r.records()
    assert error["code"] == "invalid_input"
    assert "all-minilm" in error["message"]
    assert "localgpt ingest --force -C default" in error["message"]
    forced = invoke("ingest", str(corpus), "-m", "nomic-embed-text", "--force", "--json")
    assert forced.exit_code == 0, forced.stderr
    assert summary_of(forced)["added"] == 5
    stats = invoke("docs", "stats", "--json").records()[0]
    assert (stats["model"], stats["dim"], stats["documents"]) == ("nomic-embed-text", 768, 5)


def test_walk_skips_hidden_binary_and_symlinks_out_of_the_root(standin, tmp_path):
    root = tmp_path / "tree"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nnot for the index\n")
    (root / "docs" / "drafts").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.md").write_text("# hidden\n")
    (root / ".env").write_text("TOKEN=1\n")
    (root / "docs" / "a.md").write_text("# A\n\ntext a\n")
    (root / "docs" / "drafts" / "d.md").write_text("# D\n\ntext d\n")
    (root / "docs" / "b.py").write_text("x = 1\n")
    (root / "blob.dat").write_bytes(b"\x00\x01binary\x00" * 10)
    (root / "pic.png").write_bytes(b"\x89PNG\r\n")
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linkdir").symlink_to(outside)
    r = invoke("ingest", str(root), "--json")
    assert r.exit_code == 0
    names = sorted(Path(d["path"]).name for d in records_of(r) if d["status"] == "added")
    assert names == ["a.md", "b.py", "d.md"]
    # blob.dat, sniffed; pic.png, no image for OCR (rag/parse/image.py) and skipped as before
    assert summary_of(r)["skipped"] == 2
    skipped = [d for d in records_of(r) if d["status"] == "skipped"]
    assert sorted((Path(d["path"]).name, d["code"]) for d in skipped) == [
        ("blob.dat", "binary_file"), ("pic.png", "binary_file")]
    again = invoke("ingest", str(root), "--json")
    assert summary_of(again)["skipped"] == 0 and summary_of(again)["unchanged"] == 5

    other = invoke(
        "ingest", str(root), "-C", "filtered", "--include", "*.md", "--exclude", "drafts",
        "--json",
    )  # fmt: skip
    assert [Path(d["path"]).name for d in records_of(other)] == ["a.md"]


def test_globs_and_missing_paths(standin, corpus):
    r = invoke("ingest", str(corpus / "*.md"), "--json")
    assert [Path(d["path"]).name for d in records_of(r)] == ["vpn.md"]
    missing = invoke("ingest", str(corpus / "nope"), "--prune")
    assert missing.exit_code == 6 and "No such file or folder" in missing.stderr
    assert len({row[1] for row in snapshot(home())}) == 1  # --prune did not run
    nothing = invoke("ingest", str(corpus / "*.rst"))
    assert nothing.exit_code == 6 and "matches no file" in nothing.stderr


def test_cron_run_minimal_environment_is_silent_and_idempotent(standin, corpus, tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "cronhome"),
        "LOCALGPT_HOME": os.environ["LOCALGPT_HOME"],
        "OLLAMA_HOST": standin.url,
    }
    (tmp_path / "cronhome").mkdir()

    def cron(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "localgpt_cli", "ingest", str(corpus), "--prune", *extra],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=ROOT,
            timeout=120,
        )  # fmt: skip

    first = cron()
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    calls = standin.embed_calls
    assert calls > 0
    second = cron("--json")
    assert second.returncode == 0 and second.stderr == ""
    lines = second.stdout.splitlines()
    assert len(lines) == 1 and '"unchanged":4' in lines[0]
    assert standin.embed_calls == calls


def _slow_hashed(texts: list[str]) -> list[list[float]]:
    time.sleep(0.1)
    return hashed_embeddings(texts, 768)


@pytest.mark.slow
def test_sigkill_at_any_moment_converges_to_the_uninterrupted_index(standin, tmp_path):
    standin.set_embedder("nomic-embed-text", _slow_hashed)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(40):
        (corpus / f"doc{i:02}.md").write_text(long_markdown(4 + i % 4, first=10 * i, title=f"D{i}"))

    def start(home_dir: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "localgpt_cli", "ingest", str(corpus), "--json",
             "--batch-size", "4", "--chunk-size", "500", "--chunk-overlap", "80"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "LOCALGPT_HOME": str(home_dir)}, cwd=ROOT, text=True,
        )  # fmt: skip

    reference = tmp_path / "reference"
    proc = start(reference)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    expected = snapshot(reference)
    assert len(expected) > 150 and all(has_vec for *_, has_vec in expected)

    killed = tmp_path / "killed"
    kills = 0
    # before anything is stored, then at several points after the first commit
    for wait_for_record, delay in ((False, 1.0), (True, 0.0), (True, 0.5), (True, 1.2)):
        proc = start(killed)
        assert proc.stdout is not None
        if wait_for_record:
            line = proc.stdout.readline()
            if '"type":"summary"' in line:  # finished before we could kill it
                proc.wait()
                continue
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
    assert kills >= 3
    final = start(killed)
    final.communicate(timeout=120)
    assert final.returncode == 0
    assert snapshot(killed) == expected
    # and the manifest caught up: one more run has nothing to do
    calls = standin.embed_calls
    again = start(killed)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and '"unchanged":40' in out and '"added":0' in out
    assert standin.embed_calls == calls


def test_a_model_that_is_not_pulled_exits_4_and_pins_nothing(standin, corpus):
    r = invoke("ingest", str(corpus), "-m", "not-pulled-embedder")
    assert r.exit_code == 4
    assert "localgpt models pull not-pulled-embedder" in r.stderr
    # the failed model was not recorded: the default one works next
    ok = invoke("ingest", str(corpus), "--json")
    assert ok.exit_code == 0 and summary_of(ok)["added"] == 4
    assert invoke("docs", "stats", "--json").records()[0]["model"] == "nomic-embed-text"


def test_manifest_journal_survives_a_torn_line_and_compacts(tmp_path):
    from localgpt_cli.rag.manifest import OK, Entry, LocalFile, Manifest

    path = tmp_path / "m.jsonl"
    file = LocalFile(path)

    def entry(name: str, size: int) -> Entry:
        return Entry(str(tmp_path / name), name, size, 1, "sha", "text", 1, OK, "500/80", "now")

    m = Manifest.load(file, "db", "c")
    m.put(entry("a", 1))
    m.put(entry("b", 2))
    m.flush()
    m.put(entry("a", 3))
    m.remove(str(tmp_path / "b"))
    m.flush()
    with open(path, "ab") as fh:
        fh.write(b'{"op": "put", "path": "/torn')  # SIGKILL in the middle of a write
    loaded = Manifest.load(file, "db", "c")
    assert {e.path: e.size for e in loaded.entries.values()} == {str(tmp_path / "a"): 3}
    loaded.put(entry("c", 4))
    loaded.flush()  # starts on a fresh line: the torn one does not swallow it
    again = Manifest.load(file, "db", "c")
    assert sorted(e.document_id for e in again.entries.values()) == ["a", "c"]
    again.compact()
    assert len(path.read_bytes().splitlines()) == 3  # header + one line per entry
    assert Manifest.load(file, "db", "c").entries == again.entries


def test_chunk_limit_fails_the_document_with_a_clear_message(standin, tmp_path):
    notes = tmp_path / "limit"
    notes.mkdir()
    (notes / "long.md").write_text(long_markdown(14))
    (notes / "short.md").write_text("# Short\n\nfine\n")
    r = invoke("ingest", str(notes), "--max-chunks", "3", "--json")
    assert r.exit_code == 5
    (failed,) = [d for d in records_of(r) if d["status"] == "failed"]
    assert failed["code"] == "too_many_chunks" and "--max-chunks" in failed["message"]
    assert summary_of(r)["added"] == 1


def test_force_reingests_every_file_reusing_stored_embeddings(standin, corpus):
    invoke("ingest", str(corpus))
    calls = standin.embed_calls
    r = invoke("ingest", str(corpus), "--force", "--json")
    assert r.exit_code == 0
    assert {d["status"] for d in records_of(r)} == {"updated"}
    assert summary_of(r)["updated"] == 4 and summary_of(r)["embedded"] == 0
    assert standin.embed_calls == calls


def test_a_text_file_that_turns_binary_leaves_the_index(standin, corpus):
    invoke("ingest", str(corpus))
    (corpus / "todo.txt").write_bytes(b"\x00\x01\x02 now binary \x00")
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0
    (removed,) = records_of(r)
    assert removed["status"] == "removed" and removed["code"] == "binary_file"
    assert summary_of(r)["removed"] == 1
    assert not any(row[2].endswith("todo.txt") for row in snapshot(home()))
    assert summary_of(invoke("ingest", str(corpus), "--json"))["unchanged"] == 4


PREFIX = "search_document: "  # nomic-embed-text's, the tests' default model


def embedded(standin, since: int = 0) -> list[str]:
    return [t for body in embed_bodies(standin)[since:] for t in body["input"]]


def stored_texts(path: Path) -> list[str]:
    return [c["text"] for c in invoke("docs", "show", str(path), "--json").records()]


def test_every_chunk_is_embedded_under_its_documents_title_once(standin, tmp_path):
    notes = tmp_path / "titled"
    (notes / "src").mkdir(parents=True)
    (notes / "flutter.md").write_text(long_markdown(24, title="Wing flutter"))
    (notes / "report.txt").write_text("Boundary layer report\n\n" + "\n\n".join(
        paragraph(n) for n in range(30, 50)))  # fmt: skip
    (notes / "src" / "retry.py").write_text("def retry():\n    return 1\n")
    r = invoke("ingest", str(notes), "--json")
    assert r.exit_code == 0, r.stderr
    sent = embedded(standin)
    for name, title in (("flutter.md", "Wing flutter"), ("report.txt", "Boundary layer report")):
        texts = stored_texts(notes / name)
        assert len(texts) >= 4 and texts[0].lstrip("# ").startswith(title)
        # the first chunk opens with the title: not said twice; the others carry it
        assert PREFIX + texts[0] in sent
        assert all(PREFIX + f"{title}\n\n{t}" in sent for t in texts[1:])
        assert not any(t.startswith(title) for t in texts[1:])  # stored text: the bare slice
    (code,) = stored_texts(notes / "src" / "retry.py")
    assert PREFIX + "retry.py\n\n" + code in sent
    assert len(sent) == summary_of(r)["chunks"]


def test_changing_the_title_reembeds_the_document_and_a_paragraph_edit_does_not(
    standin, tmp_path
):
    notes = tmp_path / "t"
    notes.mkdir()
    doc = notes / "report.txt"
    body = "\n\n".join(paragraph(n) for n in range(24))
    doc.write_text("Old title\n\n" + body)
    chunks = records_of(invoke("ingest", str(notes), "--json"))[0]["chunks"]
    assert chunks >= 8
    before = len(embed_bodies(standin))
    doc.write_text("New title\n\n" + body)
    (rec,) = records_of(invoke("ingest", str(notes), "--json"))
    assert rec["chunks"] == chunks and rec["reused"] == 0
    again = embedded(standin, before)
    assert len(again) == chunks
    assert all(t.startswith(PREFIX + "New title") for t in again)
    before = len(embed_bodies(standin))
    doc.write_text("New title\n\n" + body.replace(paragraph(12), paragraph(12) + " Extra."))
    (rec,) = records_of(invoke("ingest", str(notes), "--json"))
    assert 1 <= len(embedded(standin, before)) <= 2 and rec["reused"] >= chunks - 2


def test_pending_chunks_are_embedded_later_with_the_same_titled_input(
    isolated_env, tmp_path, monkeypatch
):
    notes = tmp_path / "p"
    notes.mkdir()
    (notes / "long.md").write_text(long_markdown(20, title="Pending title"))
    down = invoke("ingest", str(notes), "--json", "-m", "nomic-embed-text")
    assert down.exit_code == 3 and summary_of(down)["pending_embeddings"] >= 4
    with StandIn() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        later = invoke("ingest", str(notes), "--json")
        assert later.exit_code == 0, later.stderr
        assert summary_of(later)["pending_embeddings"] == 0
        sent = embedded(server)
        texts = stored_texts(notes / "long.md")
    expected = [PREFIX + texts[0]] + [PREFIX + f"Pending title\n\n{t}" for t in texts[1:]]
    assert sorted(sent) == sorted(expected)
    # ... and they are keyed like chunks embedded at once: a fresh ingest reuses them all.
    (notes / "copy.md").write_text((notes / "long.md").read_text())
    with StandIn() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        copy = invoke("ingest", str(notes), "--json")
        assert summary_of(copy)["embed_requests"] == 0 and server.embed_calls == 0


def _make_it_a_collection_from_before_titles() -> None:
    """What a pre-title version left: no `title` column, `text_hash` of the bare text,
    manifest options without the embed recipe."""
    import pyarrow as pa

    from localgpt_cli.rag.store import open_store, text_hash

    table = open_store(home() / "lancedb").collection("default").table
    table.drop_columns(["title"])
    rows = table.to_arrow().select(["chunk_id", "text"]).to_pylist()
    old = pa.table({
        "chunk_id": [r["chunk_id"] for r in rows],
        "text_hash": [text_hash(r["text"]) for r in rows],
    })  # fmt: skip
    table.merge_insert("chunk_id").when_matched_update_all().execute(old)
    for manifest in (home() / "lancedb" / "_localgpt" / "manifests").iterdir():
        manifest.write_bytes(manifest.read_bytes().replace(b'/titled"', b'"'))


def test_a_collection_from_before_titles_is_reembedded_once(standin, tmp_path):
    notes = tmp_path / "old"
    notes.mkdir()
    (notes / "long.md").write_text(long_markdown(20, title="Old collection"))
    chunks = summary_of(invoke("ingest", str(notes), "--json"))["chunks"]
    _make_it_a_collection_from_before_titles()
    before = len(embed_bodies(standin))
    r = invoke("ingest", str(notes), "--json")
    assert r.exit_code == 0, r.stderr
    (rec,) = records_of(r)
    assert rec["status"] == "updated"
    assert rec["reused"] == 1  # the first chunk opens with the title: its input is unchanged
    sent = embedded(standin, before)
    assert len(sent) == chunks - 1
    assert all(t.startswith(PREFIX + "Old collection\n\n") for t in sent)
    assert all(has_vec for *_, has_vec in snapshot(home()))
    again = summary_of(invoke("ingest", str(notes), "--json"))
    assert again["unchanged"] == 1 and again["embed_requests"] == 0  # once, not every run


# --- Pruning touches only what this run named (issue 13, case 1) ------------------------------


def _five_notes(tmp_path: Path) -> Path:
    notes = tmp_path / "five"
    notes.mkdir()
    for i in range(1, 6):
        (notes / f"n{i}.txt").write_text(f"Note {i}\n\n{paragraph(i)}\n")
    return notes


def stored_paths() -> set[str]:
    return {row[2] for row in snapshot(home())}


def test_force_with_another_model_on_one_file_keeps_the_rest_of_the_collection(
    standin, tmp_path
):
    notes = _five_notes(tmp_path)
    assert invoke("ingest", str(notes)).exit_code == 0
    before = stored_paths()
    r = invoke("ingest", "--force", "-m", "all-minilm", str(notes / "n1.txt"))
    assert r.exit_code == 6 and r.stdout == ""
    (line,) = r.stderr.splitlines()[:1]
    assert "4" in line and "all-minilm" in line and "not among the paths given" in line
    assert "Traceback" not in r.stderr
    assert stored_paths() == before  # nothing was removed
    assert invoke("docs", "stats", "--json").records()[0]["model"] == "nomic-embed-text"


def test_reindex_with_a_model_that_is_not_there_changes_nothing(standin, tmp_path):
    notes = _five_notes(tmp_path)
    assert invoke("ingest", str(notes)).exit_code == 0
    before = stored_paths()
    r = invoke("ingest", "--force", "-m", "no-such-embedder", str(notes))
    assert r.exit_code == 4, r.stderr
    assert "no-such-embedder" in r.stderr and "Traceback" not in r.stderr
    assert stored_paths() == before
    assert invoke("docs", "stats", "--json").records()[0]["model"] == "nomic-embed-text"


def test_reindex_refuses_to_drop_documents_missing_outside_the_paths_named(standin, tmp_path):
    """A file missing outside the paths named may be on an unmounted drive, or another
    machine's on a shared store: a re-index keeps refusing instead of dropping it."""
    notes = _five_notes(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "far.txt").write_text("Far away\n\nthe archive of the blue button\n")
    assert invoke("ingest", str(notes), str(other)).exit_code == 0
    before = stored_paths()
    (other / "far.txt").rename(tmp_path / "far.txt")  # gone from here, not deleted
    r = invoke("ingest", "--force", "-m", "all-minilm", str(notes))
    assert r.exit_code == 6, r.stderr
    assert str(other / "far.txt") in r.stderr and "not among the paths given" in r.stderr
    assert stored_paths() == before


def test_reindex_reports_every_removed_document(standin, tmp_path):
    notes = _five_notes(tmp_path)
    assert invoke("ingest", str(notes)).exit_code == 0
    (notes / "n5.txt").unlink()  # gone: a re-index cannot embed it again
    r = invoke("ingest", "--force", "-m", "all-minilm", str(notes), "--json")
    assert r.exit_code == 0, r.stderr
    removed = [d for d in records_of(r) if d["status"] == "removed"]
    assert [d["path"] for d in removed] == [str(notes / "n5.txt")]
    assert summary_of(r)["removed"] == 1 and summary_of(r)["added"] == 4
    assert stored_paths() == {str(notes / f"n{i}.txt") for i in range(1, 5)}


def test_prune_of_a_subfolder_or_a_file_leaves_documents_outside_it(standin, tmp_path):
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for rel in ("a/x.txt", "b/y.txt", "b/z.txt", "top.txt"):
        (root / rel).write_text(f"{rel}\n\n{paragraph(len(rel))}\n")
    assert invoke("ingest", str(root)).exit_code == 0
    (root / "b" / "y.txt").unlink()
    (root / "top.txt").unlink()
    for args in (["--prune", str(root / "a")], ["--prune", "--force", str(root / "b" / "z.txt")]):
        r = invoke("ingest", *args, "--json")
        assert r.exit_code == 0, r.stderr
        assert summary_of(r)["removed"] == 0 and not any(
            d["status"] == "removed" for d in records_of(r)
        )
    assert str(root / "b" / "y.txt") in stored_paths()
    r = invoke("ingest", "--prune", str(root / "b"), "--json")
    assert [d["path"] for d in records_of(r) if d["status"] == "removed"] == [
        str(root / "b" / "y.txt")
    ]
    assert summary_of(r)["removed"] == 1
    assert stored_paths() == {str(root / "a" / "x.txt"), str(root / "b" / "z.txt"),
                              str(root / "top.txt")}  # fmt: skip


TREE = ("a/x1.txt", "a/x2.md", "a/deep/x3.txt", "b/y1.txt", "top.txt")
SUBPATHS = ("", "a", "a/deep", "b", "a/x1.txt", "b/y1.txt", "top.txt")
_step = st.one_of(
    st.tuples(
        st.just("ingest"),
        st.sampled_from(SUBPATHS),
        st.booleans(),  # --force
        st.booleans(),  # --prune
        st.sampled_from([None, "nomic-embed-text", "all-minilm"]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(TREE)),
    st.tuples(st.just("restore"), st.sampled_from(TREE)),
)


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_step, min_size=2, max_size=6))
def test_no_sequence_of_ingests_removes_a_document_whose_file_exists(
    standin, tmp_path_factory, monkeypatch, steps
):
    """Ingests of sub-paths, with and without --force, --prune and another model, with
    files deleted and restored in between: a document leaves the collection only when its
    file is gone (or it moved), and every removal is reported and counted."""
    base = tmp_path_factory.mktemp("prop")
    monkeypatch.setenv("LOCALGPT_HOME", str(base / "home"))
    root = base / "tree"

    def restore(rel: str) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\n{paragraph(TREE.index(rel))}\n")

    for rel in TREE:
        restore(rel)
    assert invoke("ingest", str(root)).exit_code == 0
    for step in steps:
        if step[0] == "delete":
            (root / step[1]).unlink(missing_ok=True)
            continue
        if step[0] == "restore":
            restore(step[1])
            continue
        _, sub, force, prune, model = step
        target = root / sub if sub else root
        if not target.exists():
            continue
        before = stored_paths()
        args = [str(target), "--json"] + ["--force"] * force + ["--prune"] * prune
        r = invoke("ingest", *args, *(["-m", model] if model else []))
        assert r.exit_code in (0, 6), (step, r.stderr)
        after = stored_paths()
        docs = records_of(r)
        removed = {d["path"] for d in docs if d["status"] == "removed"}
        moved_from = {d["from"] for d in docs if d["status"] == "moved"}
        for path in before - after:
            assert not os.path.exists(path), (step, path)
            assert path in removed | moved_from, (step, path)
        if r.exit_code == 0:
            assert summary_of(r)["removed"] == len(removed)
        else:
            assert after == before


# --- Non-regular files and bounded reads (issue 13, case 2) -----------------------------------


def test_fifos_and_devices_are_skipped_with_a_warning_never_opened(standin, corpus):
    os.mkfifo(corpus / "pipe.txt")
    os.mkfifo(corpus / "p")
    named_fifo = corpus.parent / "named.md"
    os.mkfifo(named_fifo)
    # A real process with a time limit: if the FIFO were opened, the run would block forever
    # (and hold the ingest lock); the timeout turns that into a failure, not a hung suite.
    r = run("ingest", str(corpus), str(named_fifo), "/dev/zero", "--json", timeout=90)
    assert r.exit_code == 0, r.stderr
    assert {Path(d["path"]).name for d in records_of(r) if d["status"] == "added"} == {
        "vpn.md", "retry.py", "todo.txt", "manual.pdf"
    }
    assert summary_of(r)["added"] == 4 and summary_of(r)["skipped"] == 4
    assert sorted(d["path"] for d in records_of(r) if d["status"] == "skipped") == sorted(
        str(p) for p in (corpus / "pipe.txt", corpus / "p", named_fifo, "/dev/zero")
    )
    warnings = [json.loads(line) for line in r.stderr.splitlines()]
    skipped = sorted(w["message"] for w in warnings if w["code"] == "not_regular_file")
    assert skipped == sorted(
        f"{p}: skipped: not a regular file"
        for p in (corpus / "pipe.txt", corpus / "p", named_fifo, "/dev/zero")
    )


def test_reads_are_bounded_by_the_size_limit_whatever_stat_says(standin):
    """/proc files report size 0 and yield more: what a file growing while read does."""
    r = invoke("ingest", "/proc/self/status", "--max-file-size", "100", "--json")
    assert r.exit_code == 5, r.stderr
    (failed,) = records_of(r)
    assert failed["status"] == "failed" and failed["code"] == "too_large"
    assert "--max-file-size" in failed["message"]
    assert summary_of(r)["added"] == 0


# --- File names that are not UTF-8 (issue 13, case 16) ---------------------------------------


def test_a_file_name_that_is_not_utf8_fails_alone(standin, corpus):
    bad = os.path.join(os.fsencode(corpus), b"caf\xe9.txt")
    with open(bad, "wb") as fh:
        fh.write(b"Caf\xc3\xa9 notes.\n")
    shown = str(corpus / "caf\\xe9.txt")  # the byte shown escaped, as ls -b does
    r = run("ingest", str(corpus), "--json", timeout=90)
    assert r.exit_code == 5, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    failed = [d for d in records_of(r) if d["status"] == "failed"]
    assert [(d["path"], d["code"]) for d in failed] == [(shown, "invalid_file_name")]
    assert "not valid UTF-8" in failed[0]["message"] and "rename" in failed[0]["message"]
    assert summary_of(r)["added"] == 4 and summary_of(r)["failed"] == 1
    assert len({row[1] for row in snapshot(home())}) == 4
    plain = run("ingest", str(corpus), timeout=90)  # text mode: one line, the name escaped
    assert plain.exit_code == 5 and plain.stdout == ""
    (line, last) = plain.stderr.splitlines()
    assert line.startswith(f"localgpt: error: {shown}: ") and "failed to ingest" in last


# --- Small ones (issue 13, case 13) ----------------------------------------------------------


def test_empty_files_are_skipped_and_reported_not_counted_as_documents(standin, corpus):
    (corpus / "empty.txt").write_text("")
    (corpus / "blank.md").write_text("  \n\n")
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0, r.stderr
    summary = summary_of(r)
    docs = records_of(r)
    listed = invoke("docs", "list", "--json").records()
    # every document counted as added is one `docs list` shows, and every file counted
    # has its record
    assert summary["added"] == 4 == len(listed)
    assert {Path(d["path"]).name for d in docs if d["status"] == "added"} == {
        Path(d["path"]).name for d in listed
    }
    skipped = {Path(d["path"]).name: d for d in docs if d["status"] == "skipped"}
    assert set(skipped) == {"empty.txt", "blank.md"} and summary["skipped"] == 2
    assert all(d["code"] == "empty" and "no text" in d["message"] for d in skipped.values())
    again = invoke("ingest", str(corpus), "--json")  # remembered: not read again
    assert records_of(again) == [] and summary_of(again)["unchanged"] == 6
    (corpus / "todo.txt").write_text("\n")  # a document that becomes empty leaves the index
    r = invoke("ingest", str(corpus), "--json")
    (removed,) = records_of(r)
    assert (removed["status"], removed["code"]) == ("removed", "empty")
    assert summary_of(r)["removed"] == 1
    assert not any(row[2].endswith("todo.txt") for row in snapshot(home()))


def test_dry_run_prints_its_plan_when_piped(standin, corpus):
    invoke("ingest", str(corpus))
    (corpus / "todo.txt").write_text("Something else entirely.\n")
    (corpus / "new.md").write_text("# New\n\nA new note.\n")
    r = invoke("ingest", str(corpus), "--dry-run")
    assert r.exit_code == 0 and r.stderr == ""
    assert r.stdout.splitlines() == [
        f"would be added       {corpus / 'new.md'}",
        f"would be updated     {corpus / 'todo.txt'}",
        "Dry run: would be 1 added, 1 updated, 3 unchanged",
    ]


def test_a_lost_manifest_is_rebuilt_from_the_store_without_reembedding(standin, corpus):
    assert invoke("ingest", str(corpus)).exit_code == 0
    calls, version, rows = standin.embed_calls, table_version(home()), snapshot(home())
    for manifest in (home() / "lancedb" / "_localgpt" / "manifests").iterdir():
        manifest.unlink()
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0, r.stderr
    assert records_of(r) == []
    assert summary_of(r)["unchanged"] == 4 and summary_of(r)["added"] == 0
    assert standin.embed_calls == calls and summary_of(r)["embed_requests"] == 0
    assert table_version(home()) == version and snapshot(home()) == rows
    # the manifest is back: the next run costs a stat per file
    assert summary_of(invoke("ingest", str(corpus), "--json"))["unchanged"] == 4
    listed = invoke("docs", "list", "--json").records()
    assert len(listed) == 4 and all(d["status"] == "ok" for d in listed)


def test_a_lost_manifest_with_an_edited_file_updates_only_that_file(standin, corpus):
    first = invoke("ingest", str(corpus), "--json")
    ids = {Path(d["path"]).name: d["document_id"] for d in records_of(first)}
    for manifest in (home() / "lancedb" / "_localgpt" / "manifests").iterdir():
        manifest.unlink()
    (corpus / "todo.txt").write_text("Buy oat milk.\nRenew the passport.\nCall the bank.\n")
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0, r.stderr
    (rec,) = records_of(r)
    assert (Path(rec["path"]).name, rec["status"]) == ("todo.txt", "updated")
    assert rec["document_id"] == ids["todo.txt"]
    assert summary_of(r)["unchanged"] == 3


def test_the_model_mismatch_hint_names_the_model_to_use(standin, corpus):
    standin.add_model("nomic-embed-text", capabilities=("embedding",), embedding_dim=768)
    standin.add_model("all-minilm", capabilities=("embedding",), embedding_dim=384)
    assert invoke("ingest", str(corpus), "-m", "all-minilm").exit_code == 0
    r = invoke("ingest", str(corpus), "-m", "nomic-embed-text")
    assert r.exit_code == 6
    command = f"localgpt ingest --force -C default -m nomic-embed-text {corpus}"
    assert "localgpt ingest --force -C default -m nomic-embed-text PATH" in r.stderr
    # ... and doing what it says re-indexes
    forced = invoke(*command.split()[1:], "--json")
    assert forced.exit_code == 0, forced.stderr
    assert invoke("docs", "stats", "--json").records()[0]["model"] == "nomic-embed-text"
