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
