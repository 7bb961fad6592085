"""The top-level command: help, version, unknown commands and flags."""

from __future__ import annotations

import pytest

from localgpt_cli import __version__
from tests.cli import invoke, run_with_stdin_closed


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
