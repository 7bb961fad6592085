"""Man pages and completions are generated from the click commands and kept current."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requires import unavailable

ROOT = Path(__file__).resolve().parent.parent


def test_man_pages_and_completions_are_not_stale():
    result = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "gendocs.py"), "--check"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _bash_complete(line: str) -> list[str]:
    words = line.split(" ")
    script = f"""
source {ROOT / 'completions' / 'localgpt'}
COMP_WORDS=({' '.join(repr(w) for w in words)})
COMP_CWORD={len(words) - 1}
_localgpt
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_bash_completion_offers_subcommands_and_their_flags():
    assert {"chat", "models", "config"} <= set(_bash_complete("localgpt "))
    assert "--json" not in _bash_complete("localgpt ")
    assert "--json" in _bash_complete("localgpt --")
    assert _bash_complete("localgpt chat --h") == ["--hide-thinking"]
    assert {"list", "pull", "ps", "show"} <= set(_bash_complete("localgpt --json models "))
    assert "--refresh" in _bash_complete("localgpt models list --")


@pytest.mark.parametrize(("shell", "name"), [("zsh", "_localgpt"), ("fish", "localgpt.fish")])
def test_other_shells_parse_the_scripts(shell, name):
    exe = shutil.which(shell)
    if exe is None:
        # .ci/run installs both shells: in CI a missing one is a failure, not a skip.
        unavailable(f"{shell} is not installed")
    flag = ["-n"] if shell == "zsh" else ["--no-execute"]
    result = subprocess.run([exe, *flag, str(ROOT / "completions" / name)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
