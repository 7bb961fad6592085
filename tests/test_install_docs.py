"""Man pages and shell completions reach the user: `pip install` puts them where man and
the shells look, and `localgpt man` / `localgpt completions` print the same files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import invoke

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = {
    "bash": ("completions/localgpt", "share/bash-completion/completions/localgpt"),
    "zsh": ("completions/_localgpt", "share/zsh/site-functions/_localgpt"),
    "fish": ("completions/localgpt.fish", "share/fish/vendor_completions.d/localgpt.fish"),
}


def pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_pip_install_puts_man_pages_and_completions_under_share(tmp_path):
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("localgpt_cli", "man", "completions"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip("wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(src))
    (wheel,) = (tmp_path / "dist").glob("localgpt_cli-*.whl")
    # --target lays out bin/, share/ and the package like a prefix; --prefix would first
    # uninstall the localgpt this test runs from.
    prefix = tmp_path / "prefix"
    pip("install", "--no-deps", "--no-index", "--quiet", "--target", str(prefix), str(wheel))

    pages = sorted(p.name for p in (ROOT / "man").glob("*.1"))
    assert "localgpt.1" in pages and "localgpt-search.1" in pages
    installed = prefix / "share" / "man" / "man1"
    assert sorted(p.name for p in installed.iterdir()) == pages
    for page in pages:
        assert (installed / page).read_bytes() == (ROOT / "man" / page).read_bytes()
    for committed, target in COMPLETIONS.values():
        assert (prefix / target).read_bytes() == (ROOT / committed).read_bytes()


@pytest.mark.parametrize("shell", sorted(COMPLETIONS))
def test_localgpt_completions_prints_the_installed_script(shell):
    r = invoke("completions", shell)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (ROOT / COMPLETIONS[shell][0]).read_text()
    record = json.loads(invoke("--json", "completions", shell).stdout)
    assert record == {"type": "completion", "shell": shell, "script": r.stdout}


def test_localgpt_man_prints_the_installed_pages():
    assert invoke("man").stdout == (ROOT / "man" / "localgpt.1").read_text()
    r = invoke("man", "docs", "list")
    assert r.exit_code == 0 and r.stdout == (ROOT / "man" / "localgpt-docs-list.1").read_text()
    record = json.loads(invoke("man", "search", "--json").stdout)
    assert record["type"] == "man_page" and record["name"] == "localgpt-search"
    assert record["roff"] == (ROOT / "man" / "localgpt-search.1").read_text()


def test_an_unknown_man_page_is_a_usage_error_listing_the_pages():
    r = invoke("man", "serch")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "'localgpt serch'" in r.stderr
    assert "search" in r.stderr and "docs list" in r.stderr
    bad_shell = invoke("completions", "tcsh")
    assert bad_shell.exit_code == 2 and "tcsh" in bad_shell.stderr
