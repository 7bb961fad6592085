"""A reader that closes stdout early (`localgpt … | head -1`) ends a command normally.

As for any shell tool ended by SIGPIPE: exit status 141, nothing on stderr — and nothing
lost: a chat turn cut this way is stored as far as it got, marked `aborted`. Every test
runs a real process whose stdout is a pipe the test closes after the first line, with
more output (or more tokens) still to come, so the next write meets the closed pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localgpt_cli.errors import EXIT_PIPE
from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import ROOT, invoke
from tests.standin import Reply


def first_then_close(*args: str, read: int | None = None) -> tuple[bytes, int, bytes]:
    """Run `localgpt ARGS`, read its first line (or `read` bytes), close the pipe, and
    return (what was read, exit status, everything on stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "localgpt_cli", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=os.environ.copy(), cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline() if read is None else proc.stdout.read(read)
    proc.stdout.close()
    err = proc.stderr.read()
    return first, proc.wait(timeout=60), err


def history(isolated_env: Path) -> SQLiteStore:
    return SQLiteStore.open(isolated_env / "localgpt" / "history.db")


@pytest.mark.parametrize("json_mode", [True, False], ids=["json", "plain"])
def test_chat_piped_into_head_exits_141_and_stores_the_answer_as_far_as_it_got(
    standin, isolated_env, json_mode
):
    standin.script(Reply(content=["first "] + ["more "] * 200, delay=0.05))
    args = ["chat", "--json", "q"] if json_mode else ["chat", "q"]
    first, code, err = first_then_close(*args, read=None if json_mode else len("first "))
    assert (code, err) == (EXIT_PIPE, b"")
    if json_mode:
        assert json.loads(first)["payload"] == "first "
    else:
        assert first == b"first "
    assert standin.wait_for_disconnects(1, timeout=5), "the model stream was not closed"
    with history(isolated_env) as store:
        conversation = store.latest()
        assert conversation is not None
        user, answer = store.messages(conversation.id)
    assert (user.role, user.content) == ("user", "q")
    assert answer.role == "assistant" and answer.content.startswith("first more ")
    assert answer.metadata["done_reason"] == "aborted"


def test_history_show_piped_into_head_exits_141(isolated_env):
    with history(isolated_env) as store:
        conversation = store.create_conversation("llama3.2", title="a long conversation")
        for i in range(2000):
            store.add_message(conversation.id, "user", f"message {i} " + "words " * 20)
    first, code, err = first_then_close("history", "show", "latest", "--json")
    assert (code, err) == (EXIT_PIPE, b"")
    assert json.loads(first)["content"].startswith("message 0 ")


@pytest.fixture
def big_document(standin, tmp_path: Path) -> Path:
    """One ingested text file of ~500 passages, each holding the word `pipes`."""
    path = tmp_path / "notes" / "big.txt"
    path.parent.mkdir()
    path.write_text("".join(
        f"Paragraph {i}: the reader of the pipes went away before the writer finished.\n\n"
        for i in range(5000)
    ))
    assert invoke("ingest", str(path.parent)).exit_code == 0
    return path


@pytest.mark.parametrize(("args", "json_mode"), [
    (["search", "--mode", "keyword", "-k", "400", "pipes"], False),
    (["search", "--mode", "keyword", "-k", "400", "--json", "pipes"], True),
    (["docs", "show", "{path}"], False),
    (["docs", "show", "--json", "{path}"], True),
], ids=["search-plain", "search-json", "docs-show-plain", "docs-show-json"])
def test_search_and_docs_piped_into_head_exit_141(big_document, args, json_mode):
    first, code, err = first_then_close(*(a.format(path=big_document) for a in args))
    assert (code, err) == (EXIT_PIPE, b"")
    if json_mode:
        assert json.loads(first)["path"] == str(big_document)
    else:
        assert first.strip()
