"""The house rules of the package (issue 14), read from the source with `ast`.

Why a test: layers only stay layers if a change that crosses one fails at once. The rules:
the kernel imports neither click nor rich; only `render/` imports rich and prompt_toolkit
(the REPL's line editor); only `rag/store/` imports lancedb; only `rag/ray/` imports ray
and lance-ray (the `[ray]` extra); only `llm/` imports ollama or an HTTP client (httpx,
requests, urllib3), with the exceptions listed in `HTTP_EXCEPTIONS`; no import cycle
between the package's modules; no module over 400 lines; no function over 60 lines
except the data tables in `LONG_FUNCTION_ALLOWLIST`. The package is never imported: the
checker reads the files, so a module that would fail to import (or import slowly) is
checked all the same.

Every import counts, those inside functions included (a lazy import is still a dependency
and still closes a cycle when it runs), except those under `if TYPE_CHECKING:`, which never
run. Each failure names the file, the line and the rule. The checker itself is tested on
small synthetic packages at the end of this file, so it cannot silently pass.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "localgpt_cli"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# Functions allowed over MAX_FUNCTION_LINES because they are tables of data, not logic:
# "path/inside/the/package.py:qualified.name" -> why it is a table. Keep it empty unless a
# function really is one.
LONG_FUNCTION_ALLOWLIST: dict[str, str] = {}

# Modules outside llm/ allowed to import an HTTP client, "path/inside/the/package.py" -> why.
# (rag/s3.py reaches S3 through obstore, which is not an HTTP client of ours to police.)
HTTP_EXCEPTIONS: dict[str, str] = {}

# The HTTP clients: third-party, and the standard library's own.
HTTP_CLIENTS = (
    "ollama", "httpx", "requests", "urllib3", "aiohttp", "urllib.request", "http.client"
)  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """Modules under `owner` (a folder inside the package; "" for none) may import
    `libraries`; any other module that does breaks the rule (`scope`: only modules under
    that folder are checked; "" for all)."""

    name: str
    libraries: tuple[str, ...]
    owner: str = ""
    scope: str = ""
    exceptions: tuple[str, ...] = ()


IMPORT_RULES = (
    Rule("the kernel imports no click", ("click",), scope="kernel/"),
    Rule("the kernel imports no rich", ("rich",), scope="kernel/"),
    Rule("only render/ imports rich", ("rich",), owner="render/"),
    Rule("only rag/store/ imports lancedb", ("lancedb",), owner="rag/store/"),
    Rule("only history/ imports psycopg", ("psycopg",), owner="history/"),
    Rule("only rag/ray/ imports ray or lance-ray", ("ray", "lance_ray"), owner="rag/ray/"),
    Rule("only render/ imports prompt_toolkit", ("prompt_toolkit",), owner="render/"),
    Rule(
        "only llm/ imports ollama or an HTTP client",
        HTTP_CLIENTS,
        owner="llm/",
        exceptions=tuple(HTTP_EXCEPTIONS),
    ),
)


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the module that makes it sees it."""

    module: str  # dotted name of the importing module
    path: str  # its file, relative to the package folder
    line: int
    target: str  # absolute dotted name imported (a module, or a name's module)
    names: tuple[str, ...] = ()  # `from LIBRARY import NAMES`, names that may be modules


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the repository (or to the synthetic package's parent)
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


# --- reading the package -----------------------------------------------------------------


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, type_hints: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under `if TYPE_CHECKING:`
    (unless `type_hints`: a cycle there never runs but is still a circle in the design)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_hints:
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports(package: Path, type_hints: bool = False) -> list[Import]:
    """Every import of every module; relative imports resolved, and `from pkg import name`
    taken as an import of `pkg.name` when that is a module, else of `pkg`."""
    known = modules(package)
    out = []
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        rel = str(path.relative_to(package))
        for node in _import_nodes(ast.parse(path.read_text(), str(path)), type_hints):
            if isinstance(node, ast.Import):
                out += [Import(module, rel, node.lineno, a.name) for a in node.names]
                continue
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            if base.split(".")[0] != package.name:
                names = tuple(alias.name for alias in node.names)
                out.append(Import(module, rel, node.lineno, base, names))
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append(Import(module, rel, node.lineno, sub if sub in known else base))
    return sorted(set(out), key=lambda i: (i.path, i.line, i.target))


# --- the checks ------------------------------------------------------------------------------


def check_import_rules(package: Path, rules: tuple[Rule, ...] = IMPORT_RULES) -> list[Violation]:
    found = []
    for imp in imports(package):
        for rule in rules:
            if not _imports_any(imp, rule.libraries) or imp.path in rule.exceptions:
                continue
            if rule.scope and not imp.path.startswith(rule.scope):
                continue
            if rule.owner and imp.path.startswith(rule.owner):
                continue
            found.append(
                Violation(_shown(package, imp.path), imp.line, rule.name, f"imports {imp.target}")
            )
    return found


def _imports_any(imp: Import, libraries: tuple[str, ...]) -> bool:
    """Whether the import is of one of the libraries or a module inside one
    (`from urllib import request` imports `urllib.request`)."""
    names = [imp.target] + [f"{imp.target}.{name}" for name in imp.names]
    return any(n == lib or n.startswith(lib + ".") for n in names for lib in libraries)


def check_cycles(package: Path, type_hints: bool = False) -> list[Violation]:
    """One violation per cycle: for every module in a strongly connected group, the
    shortest cycle through it (each cycle once), each step with the line of the import
    that makes it. `type_hints` counts the imports under `if TYPE_CHECKING:` too."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(package, type_hints):
        target = imp.target
        if target.split(".")[0] == package.name and target != imp.module:
            edges.setdefault(imp.module, {}).setdefault(target, imp)
    found = []
    for group in _strongly_connected(edges):
        cycles: dict[frozenset[tuple[str, str]], list[str]] = {}
        for member in group:  # the shortest cycle through each module of the group
            cycle = _a_cycle(member, group, edges)
            cycles.setdefault(frozenset(zip(cycle, cycle[1:], strict=False)), cycle)
        for cycle in cycles.values():
            first = edges[cycle[0]][cycle[1]]
            steps = " -> ".join(
                f"{a} ({edges[a][b].path}:{edges[a][b].line})"
                for a, b in zip(cycle, cycle[1:], strict=False)
            )
            found.append(
                Violation(
                    _shown(package, first.path),
                    first.line,
                    "no import cycle between modules",
                    f"{steps} -> {cycle[-1]}",
                )
            )
    return found


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; groups of two or more modules, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups = []
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def _a_cycle(start: str, group: list[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """A shortest cycle from `start` through the group (breadth-first), as a closed path."""
    members = set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(edges.get(node, {})):
            if child == start:
                return paths[node] + [start]
            if child in members and child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group has one


def check_sizes(package: Path, allow: dict[str, str] = LONG_FUNCTION_ALLOWLIST) -> list[Violation]:
    found = []
    for path in modules(package).values():
        rel = str(path.relative_to(package))
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(
                Violation(
                    _shown(package, rel),
                    1,
                    f"no module over {MAX_MODULE_LINES} lines",
                    f"{lines} lines",
                )  # fmt: skip
            )
        for qualname, node in _functions(ast.parse(source, str(path))):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and f"{rel}:{qualname}" not in allow:
                found.append(
                    Violation(
                        _shown(package, rel),
                        node.lineno,
                        f"no function over {MAX_FUNCTION_LINES} lines",
                        f"{qualname} has {length} lines",
                    )  # fmt: skip
                )
    return found


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name (nested ones included)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _shown(package: Path, rel: str) -> str:
    return f"{package.name}/{rel}"


def _report(found: list[Violation]) -> str:
    return f"{len(found)} violation(s):\n" + "\n".join(str(v) for v in found)


# --- the rules on the package ----------------------------------------------------------------


@pytest.mark.parametrize("rule", IMPORT_RULES, ids=lambda r: r.name)
def test_import_rule(rule: Rule) -> None:
    found = check_import_rules(PACKAGE, (rule,))
    assert not found, _report(found)


def test_no_import_cycle() -> None:
    found = check_cycles(PACKAGE)
    assert not found, _report(found)


def test_no_import_cycle_through_type_hints() -> None:
    # An import under TYPE_CHECKING never runs, but two modules that name each other's
    # types are still one design split in two (issue 25: ChatFlags got a module of its own).
    found = check_cycles(PACKAGE, type_hints=True)
    assert not found, _report(found)


def test_no_long_module_or_function() -> None:
    found = check_sizes(PACKAGE)
    assert not found, _report(found)


def test_the_allowlist_names_functions_that_exist() -> None:
    """A stale allowlist entry would let the next long function of that name in."""
    functions = {
        f"{path.relative_to(PACKAGE)}:{name}"
        for path in modules(PACKAGE).values()
        for name, _ in _functions(ast.parse(path.read_text()))
    }
    assert set(LONG_FUNCTION_ALLOWLIST) <= functions


# --- the checker on synthetic packages -------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> Path:
    """A package `pkg` under root with the given files (relative path -> source)."""
    package = root / "pkg"
    for rel, source in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == package.parent:
                break
            (folder / "__init__.py").touch()
        path.write_text(source)
    return package


CLEAN = {
    "kernel/loop.py": "from ..llm import client\nfrom pkg.rag.store import search\n",
    "render/out.py": "import rich.console\n\ndef f():\n    from rich.table import Table\n",
    "rag/store/search.py": "def q():\n    import lancedb\n    return lancedb\n",
    "llm/client.py": "import httpx\nfrom ollama import Client\n",
    "cli/main.py": "import click\nfrom pkg.kernel import loop\nfrom pkg.render import out\n",
    # neighbours of HTTP clients that are not one
    "cli/paths.py": "import urllib.parse\nfrom urllib import parse\nimport http\nimport httpx_x\n",
}


def test_a_clean_package_passes_every_check(tmp_path: Path) -> None:
    package = write(tmp_path, CLEAN)
    assert check_import_rules(package) == []
    assert check_cycles(package) == []
    assert check_sizes(package) == []


@pytest.mark.parametrize(
    ("rel", "source", "rule"),
    [
        ("kernel/x.py", "import click\n", "the kernel imports no click"),
        ("kernel/x.py", "def f():\n    from rich import print\n", "the kernel imports no rich"),
        ("cli/x.py", "from rich.console import Console\n", "only render/ imports rich"),
        (
            "rag/retrieve.py",
            "def f():\n    import lancedb.table\n",
            "only rag/store/ imports lancedb",
        ),
        ("rag/lancedb_import.py", "import lancedb\n", "only rag/store/ imports lancedb"),
        ("tools/web.py", "import httpx\n", "only llm/ imports ollama or an HTTP client"),
        (
            "rag/ingest.py",
            "from ollama import Client\n",
            "only llm/ imports ollama or an HTTP client",
        ),
        ("cli/x.py", "import urllib3\n", "only llm/ imports ollama or an HTTP client"),
        ("cli/x.py", "import requests.adapters\n", "only llm/ imports ollama or an HTTP client"),
        ("cli/x.py", "from urllib import request\n", "only llm/ imports ollama or an HTTP client"),
        ("rag/x.py", "import http.client\n", "only llm/ imports ollama or an HTTP client"),
    ],
)
def test_each_import_rule_catches_its_import(
    tmp_path: Path, rel: str, source: str, rule: str
) -> None:
    package = write(tmp_path, {**CLEAN, rel: "\n\n" + source})
    (found,) = [v for v in check_import_rules(package) if v.rule == rule]
    assert found.path == f"pkg/{rel}" and found.line in (3, 4)
    assert str(found).startswith(f"pkg/{rel}:{found.line}: {rule}: imports ")


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    package = write(tmp_path, {
        "kernel/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from rich.console import Console\n    from pkg.kernel import y\n",
        "kernel/y.py": "from pkg.kernel import x\n",
    })  # fmt: skip
    assert check_import_rules(package) == []
    assert check_cycles(package) == []
    assert len(check_cycles(package, type_hints=True)) == 1


def test_cycles_are_found_through_every_kind_of_import(tmp_path: Path) -> None:
    package = write(tmp_path, {
        "cli/chat.py": "from pkg.cli import repl\n",
        "cli/repl.py": "def f():\n    from .chat import main\n",  # function-level, relative
        "cli/history.py": "from pkg.cli.chat import open_history\n",  # not in a cycle
        "a/one.py": "from ..b import two\n",
        "b/two.py": "import pkg.c.three\n",
        "c/three.py": "from pkg.a import one\n",
    })  # fmt: skip
    found = check_cycles(package)
    assert [v.rule for v in found] == ["no import cycle between modules"] * 2
    three, two = sorted(found, key=lambda v: v.path)
    assert three.path == "pkg/a/one.py" and three.line == 1
    assert three.detail == (
        "pkg.a.one (a/one.py:1) -> pkg.b.two (b/two.py:1) -> pkg.c.three (c/three.py:1)"
        " -> pkg.a.one"
    )
    assert two.path == "pkg/cli/chat.py"
    assert two.detail == (
        "pkg.cli.chat (cli/chat.py:1) -> pkg.cli.repl (cli/repl.py:2) -> pkg.cli.chat"
    )


def test_a_package_init_importing_its_module_and_back_is_a_cycle(tmp_path: Path) -> None:
    package = write(tmp_path, {"llm/client.py": "from pkg.llm import Provider\n"})
    (package / "llm" / "__init__.py").write_text("from .client import Client\n")
    (found,) = check_cycles(package)
    assert found.detail == (
        "pkg.llm (llm/__init__.py:1) -> pkg.llm.client (llm/client.py:1) -> pkg.llm"
    )


def function(name: str, lines: int, indent: str = "") -> str:
    """Source of a function `lines` lines long, from its `def` to its last line."""
    body = "".join(f"{indent}    x = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}():\n{body}{indent}    return x\n"


def test_long_modules_and_functions_are_found(tmp_path: Path) -> None:
    package = write(tmp_path, {
        "big.py": "x = 1\n" * 401,
        "fine.py": "x = 1\n" * 340 + function("ok", 60),  # both exactly at the limit
        "long.py": "class C:\n" + function("table", 61, "    ") + "\n"
                   + "def outer():\n" + function("inner", 61, "    ") + "    return inner\n",
    })  # fmt: skip
    found = {(v.path, v.line, v.rule, v.detail) for v in check_sizes(package)}
    assert found == {
        ("pkg/big.py", 1, "no module over 400 lines", "401 lines"),
        ("pkg/long.py", 2, "no function over 60 lines", "C.table has 61 lines"),
        ("pkg/long.py", 64, "no function over 60 lines", "outer has 63 lines"),
        ("pkg/long.py", 65, "no function over 60 lines", "outer.inner has 61 lines"),
    }
    allowed = check_sizes(package, {"long.py:C.table": "a table of data"})
    assert "C.table has 61 lines" not in {v.detail for v in allowed}
    assert len(allowed) == len(found) - 1
