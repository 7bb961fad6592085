"""Issue 25's "Small" list: each item as the user sees it (the man page's NAME line,
"1 chunk", a table on an 80-column terminal, one date format, full stops, warnings that
fit the flags, search's score columns, apply's arguments, the ingest lock, --no-save)."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

from tests.cli import ROOT, invoke
from tests.standin import Reply

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
LOCAL = r"\d{4}-\d\d-\d\d \d\d:\d\d"


def on_terminal(*args: str, cwd: Path, columns: int = 80, timeout: float = 60) -> str:
    """`localgpt ARGS` on a real pseudo-terminal `columns` wide; what it drew."""
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "50",
           "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "localgpt_cli", *args], env)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif os.waitpid(pid, os.WNOHANG)[0]:
            break
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    os.close(fd)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r\n", "\n")


def test_the_man_page_name_line_does_not_repeat_the_name(isolated_env):
    r = invoke("man")
    assert r.exit_code == 0
    name = r.stdout.split(".SH NAME\n", 1)[1].splitlines()[0]
    assert name == r"localgpt \- A local\-first command line for Ollama that speaks NDJSON."
    page = invoke("man", "search").stdout.split(".SH NAME\n", 1)[1].splitlines()[0]
    assert page.startswith(r"localgpt\-search \- Search a collection")


def test_one_chunk_is_one_chunk(standin, isolated_env, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nOne short paragraph.\n")
    screen = on_terminal("ingest", str(note), cwd=tmp_path)
    assert "(1 chunk, 1 embedded, " in screen and "1 chunks" not in screen, screen
    r = invoke("docs", "rm", "-y", str(note))
    assert r.exit_code == 0 and r.stderr == f"removed {note} (1 chunk)\n"


def test_a_missing_path_is_a_sentence(isolated_env, tmp_path):
    r = invoke("ingest", str(tmp_path / "nowhere"))
    assert r.exit_code == 6
    assert r.stderr.splitlines()[-1] == (
        f"localgpt: error: No such file or folder: {tmp_path / 'nowhere'}. "
        "Check the path (nothing was changed).")


def test_docs_list_on_80_columns_never_splits_a_path_mid_word(standin, isolated_env, tmp_path):
    work = tmp_path / "work"
    folder = work / "quarterly-engineering-reports-archive" / "infrastructure-and-networking"
    folder.mkdir(parents=True)
    (folder / "vpn-gateway-migration-postmortem-final-version.md").write_text("# VPN\n\nok\n")
    assert invoke("ingest", str(work)).exit_code == 0
    screen = on_terminal("docs", "list", cwd=work)
    lines = [line for line in screen.splitlines() if line.strip()]
    assert lines[0].split() == ["ID", "PATH", "TYPE", "CHUNKS", "STATUS", "INGESTED"]
    assert len(lines) == 2, screen  # one row, on one line: nothing wrapped
    assert all(len(line) <= 80 for line in lines)
    path = str((folder / "vpn-gateway-migration-postmortem-final-version.md").relative_to(work))
    shown = lines[1].split()[1]
    assert shown.endswith("…") and path.startswith(shown[:-1]), shown
    assert re.search(LOCAL + r"\s*$", lines[1])


def test_history_docs_and_memory_print_one_date_format(standin, isolated_env, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nOne short paragraph.\n")
    assert invoke("ingest", str(note)).exit_code == 0
    assert invoke("chat", "--no-rag", "hi").exit_code == 0
    assert invoke("memory", "add", "we deploy with Ansible").exit_code == 0
    # a pipe: the stored ISO UTC stamp, as a script parses it
    for args, column in ((("history",), 4), (("docs", "list"), 5), (("memory", "list"), 2)):
        row = invoke(*args).stdout.splitlines()[1].split("\t")
        assert re.fullmatch(ISO, row[column]), (args, row)
    # a terminal: local time to the minute, the same in the three tables
    for args in (("history",), ("docs", "list"), ("memory", "list")):
        screen = on_terminal(*args, cwd=tmp_path, columns=160)
        row = [line for line in screen.splitlines() if line.strip()][1]
        assert len(re.findall(LOCAL, row)) == 1 and not re.search(r"\d\d:\d\d:\d\d", row), row


def test_search_on_a_terminal_names_each_score(standin, isolated_env, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "vpn.md").write_text("# VPN setup\n\nTo reset the VPN, run vpn-reset.\n")
    (notes / "backup.md").write_text("# Backups\n\nBackups run nightly with restic.\n")
    assert invoke("ingest", str(notes)).exit_code == 0
    screen = on_terminal("search", "vpn setup", cwd=tmp_path)
    head = next(line for line in screen.splitlines() if line.startswith(" 1. "))
    assert re.match(r" 1\. rerank \d+\.\d{3} · cosine 0\.\d{3}  notes/vpn\.md:1-3", head), head


def test_tools_unsupported_under_no_rag_does_not_speak_of_documents(standin, isolated_env):
    r = invoke("chat", "-m", "gemma2", "--no-rag", "hi")
    assert r.exit_code == 0
    assert r.stderr == ("localgpt: warning: gemma2 cannot call tools; answering without "
                        "them.\n")


# -- apply and previews -----------------------------------------------------------------------

NOTES = "# Notes\n\nThe port is 8000.\n"
DIFF = ("--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,3 @@\n # Notes\n \n"
        "-The port is 8000.\n+The port is 8080.\n")


def propose(standin, name: str, **arguments: object) -> dict:
    """One chat whose model proposes `name`; the tool_result packet's payload."""
    standin.script(Reply(tool_calls=[{"name": name, "arguments": arguments}],
                         offered_only=True), Reply(content="Shown above."))
    r = invoke("chat", "--json", "--no-rag", "please")
    assert r.exit_code == 0, r.stderr
    [result] = [p["payload"] for p in r.records() if p["type"] == "tool_result"]
    return result


def test_apply_with_an_empty_id_is_a_usage_error(standin, isolated_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text(NOTES)
    propose(standin, "propose_edit", path="notes.md", diff=DIFF)
    for args in (("apply", ""), ("apply", "  ")):
        r = invoke(*args)
        assert (r.exit_code, r.stdout) == (2, "")
        assert r.stderr == ("localgpt: error: The preview id is empty. Give the id in the "
                            "preview's frame: localgpt apply 3f9a1c2e.\n")
    assert (tmp_path / "notes.md").read_text() == NOTES


def test_apply_finds_a_preview_older_than_the_last_50_conversations(
    standin, isolated_env, tmp_path, monkeypatch
):
    from localgpt_cli.history.sqlite import SQLiteStore

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text(NOTES)
    pid = propose(standin, "propose_edit", path="notes.md", diff=DIFF)["preview"]["id"]
    with SQLiteStore.open(Path(os.environ["LOCALGPT_HOME"]) / "history.db") as store:
        for i in range(55):
            cid = store.create_conversation("llama3.2").id
            store.add_message(cid, "user", f"question {i}")
    r = invoke("apply", "-y", pid)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "notes.md").read_text() == NOTES.replace("8000", "8080")
    r = invoke("apply", "ffffffff")
    assert r.exit_code == 6 and "no preview 'ffffffff' in the history." in r.stderr


def test_a_refusal_says_nothing_was_written_once(standin, isolated_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text(NOTES)
    pid = propose(standin, "propose_edit", path="notes.md", diff=DIFF)["preview"]["id"]
    (tmp_path / "notes.md").write_text(NOTES + "edited by hand\n")
    r = invoke("apply", "-y", pid)
    assert r.exit_code == 6 and r.stderr.count("\n") == 1
    assert r.stderr.lower().count("nothing was written") == 1, r.stderr


def test_the_model_is_told_apply_applies_edits_not_commands(standin, isolated_env, tmp_path,
                                                             monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text(NOTES)
    command = propose(standin, "propose_command", command="ls", explanation="lists")
    pid = command["preview"]["id"]
    assert command["result"] == (f"preview_sent: id {pid}. The user was shown the proposed "
                                 "command; it was not run (only the user can run it).")
    edit = propose(standin, "propose_edit", path="notes.md", diff=DIFF)
    pid = edit["preview"]["id"]
    assert edit["result"] == (f"preview_sent: id {pid}. The user was shown the proposed edit; "
                              f"the file is unchanged (localgpt apply {pid} applies it; the "
                              "user decides).")


def test_the_ingest_lock_names_no_finished_pid(standin, isolated_env, tmp_path):
    # The file still names the run before when the holder has not written its pid yet.
    import socket
    import subprocess

    lock = Path(os.environ["LOCALGPT_HOME"]) / "lancedb" / "_localgpt" / "ingest.lock"
    lock.parent.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    finished = int(gone.stdout)
    lock.write_text(f"{finished} {socket.gethostname()}\n")
    code = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        note = tmp_path / "note.md"
        note.write_text("# Note\n\nok\n")
        r = invoke("ingest", str(note))
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 75
    assert r.stderr.startswith("localgpt: error: Another ingest is writing this knowledge base")
    assert f"pid {finished}" not in r.stderr


def test_no_save_writes_not_even_the_model_cache(standin, isolated_env):
    before = sorted(p for p in isolated_env.rglob("*"))
    r = invoke("chat", "--no-save", "--no-rag", "hi")
    assert (r.exit_code, r.stdout) == (0, "Hello from llama3.2.\n"), r.stderr
    assert sorted(p for p in isolated_env.rglob("*")) == before  # no models.json either
    assert invoke("chat", "--no-rag", "hi").exit_code == 0
    assert list(isolated_env.rglob("models.json"))  # a saved chat caches, as before
