"""The top-level command: help, version, unknown commands and flags."""

from __future__ import annotations

import pytest

from localgpt_cli import __version__
from tests.cli import invoke, run, run_with_stdin_closed


def test_bare_command_prints_help_and_succeeds(isolated_env):
    r = invoke()
    assert r.exit_code == 0
    assert "Usage: localgpt" in r.stdout
    for name in ("chat", "ingest", "search", "docs", "models", "history", "tools", "config"):
        assert f"  {name} " in r.stdout


def test_version(isolated_env):
    r = invoke("--version")
    assert (r.exit_code, r.stdout) == (0, f"localgpt {__version__} (output protocol 2)\n")


def test_unknown_command_and_flag_are_usage_errors(isolated_env):
    r = invoke("chta")
    assert r.exit_code == 2 and "No such command 'chta'" in r.stderr
    r = invoke("chat", "--frobnicate")
    assert r.exit_code == 2 and "--frobnicate" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("ingest", "--wait-lock", "nan", "."),
        ("docs", "rm", "-y", "--wait-lock", "nan", "x"),
        ("chat", "--timeout", "nan", "hi"),
        ("search", "--threshold", "nan", "vpn"),
    ],
    ids=["ingest", "docs-rm", "chat", "search"],
)
def test_nan_is_a_usage_error_not_a_wait_without_end(isolated_env, args):
    """nan passes every range check (each comparison with it is false): as --wait-lock it
    waited for ever, as --timeout it was blamed on Ollama."""
    r = invoke(*args)
    assert r.exit_code == 2, r.stderr
    assert "'nan' is not in the range" in r.stderr


def test_chat_with_stdin_closed_and_no_prompt_is_a_usage_error(isolated_env):
    r = run_with_stdin_closed("chat")
    assert r.exit_code == 2, r.stderr
    assert "Nothing to ask" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--json", "search"), "Nothing to search for: give a QUERY or --queries FILE."),
        (("--json", "search", "-k", "0", "vpn"), "Invalid value for '-k': 0 is not in the range"),
        (("search", "--json", "-k", "0", "vpn"), "Invalid value for '-k': 0 is not in the range"),
        (("--json", "search", "--frobnicate", "vpn"), "No such option '--frobnicate'"),
        (("--json", "--frobnicate", "models"), "No such option '--frobnicate'"),
        (("--json", "chta"), "No such command 'chta'"),
        (("chat", "--frobnicate", "--json", "hi"), "No such option '--frobnicate'"),
    ],
    ids=["no-query", "k-0", "k-0-sub-json", "unknown-flag", "unknown-global-flag",
         "unknown-command", "flag-before-json"],
)  # fmt: skip
def test_parser_errors_are_records_in_json_mode(isolated_env, args, message):
    # Issue 25.6: click's usage errors wrote nothing on stdout under --json.
    r = run(*args)
    assert r.exit_code == 2, r.stderr
    [record] = r.records()
    assert record["type"] == "error" and record["code"] == "usage_error"
    assert record["message"].startswith(message) and record["retryable"] is False
    assert "Usage: localgpt" in r.stderr  # the person still gets click's usage text


def test_parser_errors_without_json_keep_stdout_empty(isolated_env):
    r = run("search", "-k", "0", "vpn", "--", "--json")
    assert (r.exit_code, r.stdout) == (2, "")


def test_search_without_query_or_with_both_says_which(isolated_env, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("vpn\n")
    r = invoke("search")
    assert r.exit_code == 2 and "Nothing to search for: give a QUERY or --queries FILE." in r.stderr
    r = invoke("search", "--queries", str(queries), "vpn")
    assert r.exit_code == 2 and "Give a QUERY or --queries FILE, not both." in r.stderr
