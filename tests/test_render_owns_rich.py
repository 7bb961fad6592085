"""render/ imports rich only inside functions (that only render/ imports it at all is
tests/test_architecture.py's rule): a module-level import would load rich for every
command that renders anything, plain output included."""

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


def test_render_imports_rich_only_inside_functions():
    """A module-level rich import would load rich for every command that renders."""
    for path in sorted((PACKAGE / "render").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = ast.Module(body=[n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)],
                         type_ignores=[])
        assert _imports_rich(top) == [], path.name
