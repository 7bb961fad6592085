"""The code style and types the project holds itself to, checked on every run."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.cli import ROOT


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(ROOT / ".venv" / "bin")) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return path


def test_ruff_is_clean():
    result = subprocess.run([_tool("ruff"), "check", "."], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean_on_the_package():
    result = subprocess.run([sys.executable, "-m", "mypy", "localgpt_cli"], capture_output=True,
                            text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
