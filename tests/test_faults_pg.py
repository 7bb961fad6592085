"""The PostgreSQL history when its server misbehaves (issue 24: items 2, 5 and 11, and the
standing fault rule): hang (SIGSTOP of the postmaster or of localgpt's backend), die
(SIGKILL), restart, refuse (a wrong password, a missing database) and a table locked by
another session. Each run is bounded in time (`bounded`: its deadline plus 10 s), and each
checks the exit code, the one-line message and that no stored row was lost.

Tests that stop or kill a server use their own (`fault_server`, started with durable
commits so that a killed server keeps what it acknowledged); the others share the
session's server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.cli import ROOT
from tests.faults import Faults, bounded
from tests.pg import DURABLE, PASSWORD, Server
from tests.standin import Reply

# Short server-side limits, as a user may set them in the URL, keep the runs short.
FAST_LIMITS = "?options=-c%20lock_timeout%3D1s%20-c%20statement_timeout%3D2s"


def localgpt(*args: str) -> list[str]:
    return [sys.executable, "-m", "localgpt_cli", *args]


def env_for(url: str) -> dict[str, str]:
    return dict(os.environ, LOCALGPT_HISTORY_URL=url)


def counts(url: str) -> tuple[int, int]:
    """(conversations, messages) stored, read by a separate connection."""
    import psycopg

    with psycopg.connect(url.split("?")[0], autocommit=True, connect_timeout=10) as conn:
        return tuple(conn.execute(  # type: ignore[return-value]
            "SELECT (SELECT count(*) FROM localgpt_conversations),"
            " (SELECT count(*) FROM localgpt_messages)").fetchone())


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and PASSWORD not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def fault_server() -> Iterator[Server]:
    """A server of this module's own, which the tests may stop, kill and restart."""
    from tests import pg
    from tests.requires import unavailable

    bin_dir = pg.binaries()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
    server = Server(bin_dir, DURABLE).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fault_db(fault_server: Server, standin, isolated_env) -> Iterator[str]:
    """A new database on the fault server, holding one earlier turn (its URL; the
    environment's history points at it). The server is running again afterwards."""
    from localgpt_cli.history.postgres import PostgresStore
    from localgpt_cli.ids import new_id

    if fault_server.postmaster() is None:
        fault_server.start()
    name = "f_" + new_id().lower()
    fault_server.admin(f"CREATE DATABASE {name}")
    url = fault_server.url(name)
    with PostgresStore.open(url) as store:
        cid = store.create_conversation("llama3.2").id
        store.add_message(cid, "user", "an earlier question")
        store.add_message(cid, "assistant", "an earlier answer")
    yield url
    if fault_server.postmaster() is None:
        fault_server.start()


def chat_until_first_token(url: str, delay: float = 0.5) -> subprocess.Popen[str]:
    """`chat --json` with an answer that streams slowly (ten pieces, `delay` apart),
    returned once the first token is out: the question is stored, the answer is not."""
    proc = subprocess.Popen(localgpt("chat", "--json", "a new question"), cwd=ROOT,
                            env=env_for(url), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        line = proc.stdout.readline()
        if not line or '"token"' in line:
            return proc
    proc.kill()
    raise AssertionError("no token arrived")


def finish(proc: subprocess.Popen[str], deadline: float) -> tuple[int, list[dict], str]:
    """The process's exit code, its packets and stderr, within `deadline` plus 10 s."""
    try:
        out, err = proc.communicate(timeout=deadline + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"chat still running after {deadline + 10:.0f} s") from None
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def slow_answer(standin) -> None:
    standin.script(Reply(content=[f"piece{i} " for i in range(10)], delay=0.5))


# -- refuse ---------------------------------------------------------------------------------


def test_a_missing_database_is_a_setting_naming_it(pg_server, standin, isolated_env):
    url = pg_server.url("no_such_db")
    r = bounded(localgpt("chat", "hello"), 15, env=env_for(url), cwd=ROOT)
    assert (r.returncode, r.stdout) == (6, "")
    line = one_line(r.stderr)
    assert "has no database 'no_such_db'" in line and "server is running" not in line
    assert standin.chat_requests() == []


def test_a_wrong_password_is_77_and_changes_nothing(pg_url, standin, isolated_env):
    from localgpt_cli.history.postgres import PostgresStore

    with PostgresStore.open(pg_url) as store:
        store.add_message(store.create_conversation("llama3.2").id, "user", "kept")
    before = counts(pg_url)
    r = bounded(localgpt("chat", "hello"), 15, cwd=ROOT,
                env=env_for(pg_url.replace(PASSWORD, "wrong")))  # fmt: skip
    assert (r.returncode, r.stdout) == (77, "")
    assert "refused the credentials" in one_line(r.stderr)
    assert counts(pg_url) == before and standin.chat_requests() == []


# -- a lock held by another session ---------------------------------------------------------


def _locked(url: str, table: str):
    import psycopg

    conn = psycopg.connect(url)
    conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    return conn


def test_a_locked_table_is_busy_75_within_lock_timeout(pg_url, standin, isolated_env):
    from localgpt_cli.history.postgres import PostgresStore

    with PostgresStore.open(pg_url) as store:
        store.add_message(store.create_conversation("llama3.2").id, "user", "kept")
    before = counts(pg_url)
    holder = _locked(pg_url, "localgpt_messages")
    try:
        r = bounded(localgpt("chat", "hello"), 15, env=env_for(pg_url + FAST_LIMITS), cwd=ROOT)
    finally:
        holder.close()
    assert (r.returncode, r.stdout) == (75, "")
    line = one_line(r.stderr)
    assert "is busy" in line and "lock_timeout" in line and r.seconds < 15
    assert counts(pg_url) == before  # no empty conversation left behind


def test_a_chat_killed_while_it_waits_leaves_no_empty_conversation(pg_server, pg_url, standin,
                                                                    isolated_env):
    from localgpt_cli.history.postgres import PostgresStore

    with PostgresStore.open(pg_url) as store:
        store.add_message(store.create_conversation("llama3.2").id, "user",
                          "the latest, and it stays so")
    before = counts(pg_url)
    holder = _locked(pg_url, "localgpt_messages")
    try:
        proc = subprocess.Popen(localgpt("chat", "hello"), cwd=ROOT, env=env_for(pg_url),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)  # fmt: skip
        _wait_for_lock_wait(pg_server, urlsplit(pg_url).path[1:])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        holder.close()
    assert counts(pg_url) == before
    r = bounded(localgpt("history", "--json"), 15, env=env_for(pg_url), cwd=ROOT)
    assert json.loads(r.stdout.splitlines()[0])["title"] == "the latest, and it stays so"


def _wait_for_lock_wait(server: Server, database: str) -> None:
    import psycopg

    give_up = time.monotonic() + 30
    with psycopg.connect(server.url(), autocommit=True) as conn:
        while time.monotonic() < give_up:
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE datname = %s AND"
                            " application_name = 'localgpt' AND wait_event_type = 'Lock'",
                            (database,)).fetchone():  # fmt: skip
                return
            time.sleep(0.1)
    raise AssertionError("chat never waited for the lock")


# -- hang -----------------------------------------------------------------------------------


def test_a_hung_postmaster_is_exit_3_after_the_connect_timeout(fault_server, fault_db, standin):
    before = counts(fault_db)
    with Faults(fault_server).hung([fault_server.postmaster()]):
        r = bounded(localgpt("chat", "hello"), 15, env=env_for(fault_db), cwd=ROOT)
    assert (r.returncode, r.stdout) == (3, "")
    assert "not reachable" in one_line(r.stderr)
    assert counts(fault_db) == before and standin.chat_requests() == []


def test_a_hung_backend_mid_answer_is_exit_3_and_keeps_the_question(fault_server, fault_db,
                                                                     standin):
    slow_answer(standin)
    conversations, messages = counts(fault_db)
    proc = chat_until_first_token(fault_db + FAST_LIMITS)
    faults = Faults(fault_server)
    faults.hang(fault_server.backends(urlsplit(fault_db).path[1:]))
    try:
        code, packets, err = finish(proc, 2 + 5 + 10)  # statement_timeout + margin + answer
    finally:
        faults.resume()
    done = packets[-1]["payload"]
    assert code == 3 and done["message_id"] is None
    assert done["store_error"]["code"] == "history_unreachable"
    assert "did not answer within 7 s" in one_line(err)
    assert counts(fault_db) == (conversations + 1, messages + 1)  # the question is kept


# -- restart and die ------------------------------------------------------------------------


def test_a_restart_mid_answer_stores_the_answer_on_a_new_connection(fault_server, fault_db,
                                                                    standin):
    slow_answer(standin)
    conversations, messages = counts(fault_db)
    proc = chat_until_first_token(fault_db)
    fault_server.restart()
    code, packets, err = finish(proc, 20)
    done = packets[-1]["payload"]
    assert (code, err) == (0, "")
    assert done["message_id"] is not None and "store_error" not in done
    assert counts(fault_db) == (conversations + 1, messages + 2)


def test_a_server_killed_mid_answer_is_exit_3_and_says_so_in_done(fault_server, fault_db,
                                                                  standin):
    slow_answer(standin)
    conversations, messages = counts(fault_db)
    proc = chat_until_first_token(fault_db)
    Faults(fault_server).kill()
    code, packets, err = finish(proc, 10 + 10)  # the reconnect's patience + the answer
    done = packets[-1]["payload"]
    assert code == 3 and done["message_id"] is None
    assert done["store_error"]["code"] == "history_unreachable"
    assert "the answer was not stored" in one_line(err)
    # the exit code's error is an `error` packet too, as every --json error is (before:
    # only done.store_error said it, and `select(.type=="error")` found nothing)
    error = packets[-2]
    assert error["type"] == "error" and error["payload"]["code"] == "history_unreachable"
    assert error["payload"]["message"].startswith("the answer was not stored: ")
    fault_server.start()
    assert counts(fault_db) == (conversations + 1, messages + 1)


def test_without_json_a_lost_answer_is_one_line_on_stderr(fault_server, fault_db, standin):
    """The plain renderer says the error from its packet, and nothing says it twice."""
    slow_answer(standin)
    proc = subprocess.Popen(localgpt("chat", "a new question"), cwd=ROOT,
                            env=env_for(fault_db), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None
    seen, give_up = b"", time.monotonic() + 60
    while b"piece0" not in seen and time.monotonic() < give_up:
        seen += os.read(proc.stdout.fileno(), 4096) or b""
    Faults(fault_server).kill()
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        fault_server.start()
    assert proc.returncode == 3, err
    line = one_line(err.decode())
    assert line.startswith("localgpt: error: the answer was not stored: "), line
    assert (seen + out).decode().startswith("piece0 ")
