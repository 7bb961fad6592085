"""The README's first screen and .ci/run agree on the test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    (command,) = re.findall(r'^TEST_CMD="(.*)"$', ci, flags=re.M)
    readme = (ROOT / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:25])
    assert f"\n{command}\n" in first_screen


def test_readme_install_command_is_on_the_first_screen():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:25])
    assert 'pip install -e . && .venv/bin/localgpt chat "' in first_screen
