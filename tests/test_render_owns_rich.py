"""Only render/ draws: rich is imported nowhere else in the package.

cli/ parses flags, calls the layer below and hands packets and records to render/, so
a change of how something looks is a change in render/ alone, and `localgpt --help`
(which imports cli/ but no renderer) never pays for rich.
"""

from __future__ import annotations

import ast

from tests.cli import ROOT

PACKAGE = ROOT / "localgpt_cli"


def _imports_rich(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "rich" or name.startswith("rich.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_render_imports_rich():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "render":
            continue
        for line in _imports_rich(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


def test_render_imports_rich_only_inside_functions():
    """A module-level rich import would load rich for every command that renders."""
    for path in sorted((PACKAGE / "render").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = ast.Module(body=[n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)],
                         type_ignores=[])
        assert _imports_rich(top) == [], path.name
