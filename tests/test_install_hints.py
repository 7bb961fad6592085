"""Install hints that work (issue 25.8): localgpt is not on PyPI, so `pip install
'localgpt-cli[llamacpp]'` fails in a fresh virtualenv. Every hint, in an error or in the
README, installs an extra from the source folder (`pip install -e '.[EXTRA]'`) that
pyproject.toml declares; and what `pip check` says after the `--no-deps` wheels is
explained in the README."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.cli import ROOT

EXTRA_HINT = re.compile(r"""pip install -e '\.\[([a-z,]+)\]'""")


def texts() -> dict[str, str]:
    files = sorted((ROOT / "localgpt_cli").rglob("*.py")) + [ROOT / "README.md"]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files}


def test_no_hint_names_a_package_that_is_not_on_pypi():
    found = [f"{name}:{n}" for name, text in texts().items()
             for n, line in enumerate(text.splitlines(), 1) if "localgpt-cli[" in line]
    assert found == []


def test_every_extra_a_hint_names_is_declared():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"])
    named = {extra for text in texts().values() for group in EXTRA_HINT.findall(text)
             for extra in group.split(",")}
    assert {"local", "llamacpp", "postgres"} <= named
    assert named <= declared


def test_the_postgres_hint_is_one_line_that_works_from_the_source_folder(isolated_env):
    code = ("import sys; sys.modules['psycopg'] = None; "
            "from localgpt_cli.cli.main import main; main()")
    p = subprocess.run(
        [sys.executable, "-c", code, "history"], capture_output=True, text=True, timeout=60,
        cwd=ROOT, env={**os.environ, "LOCALGPT_HISTORY_URL": "postgresql://u@127.0.0.1/db"},
    )
    assert (p.returncode, p.stdout) == (6, "")
    assert p.stderr == (
        "localgpt: error: history.url postgresql://u@127.0.0.1/db needs PostgreSQL support, "
        "which is not installed. Install it: pip install -e '.[postgres]' (in the localgpt "
        "source folder).\n")


def test_what_pip_check_reports_is_explained_in_the_readme():
    p = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    readme = " ".join((ROOT / "README.md").read_text().split())
    for line in p.stdout.splitlines():
        m = re.fullmatch(r"(\S+) (\S+) requires (\S+), which is not installed\.", line)
        assert m, f"pip check says something the README does not explain: {line}"
        assert f"`{line.removesuffix('.')}`" in readme
    assert "are left out on purpose" in readme and "harmless" in readme
