"""One-shot `search` does not pay for LanceDB's REST namespace client nor for pandas, and
gets the same answers as with them; the client still works when something really needs
it, and pyarrow sees pandas again when asked to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.kb import make_corpus

ROOT = Path(__file__).resolve().parent.parent
REST_API = "lance_namespace_urllib3_client.api"

# `localgpt ARGS` in a fresh interpreter; PRELUDE runs first. Prints to stderr whether the
# REST client's API modules (what its package __init__ imports) were loaded.
SEARCH = """
import sys
{prelude}
from localgpt_cli.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print('REST_API=' + str({rest_api!r} in sys.modules), 'PANDAS=' + str('pandas' in sys.modules),
      'EXIT=' + str(code), file=sys.stderr)
"""


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=os.environ.copy(), cwd=ROOT, timeout=120)  # fmt: skip


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_one_shot_search_skips_the_rest_client_and_answers_the_same(standin, tmp_path, mode):
    notes = make_corpus(tmp_path / "corpus")
    assert invoke("ingest", str(notes)).exit_code == 0
    argv = ["search", "--json", "-k", "4", "--threshold", "0", "--mode", mode,
            "wireguard tunnel quasar"]
    lean = python(SEARCH.format(prelude="", rest_api=REST_API), *argv)
    assert "REST_API=False PANDAS=False EXIT=0" in lean.stderr, lean.stderr
    # the same search with the whole REST client and pandas imported first, as a plain
    # `import lancedb` does
    full = python(SEARCH.format(prelude="import lance_namespace_urllib3_client, pandas",
                                rest_api=REST_API), *argv)  # fmt: skip
    assert "REST_API=True PANDAS=True EXIT=0" in full.stderr, full.stderr
    assert lean.stdout.count("\n") >= 2
    assert lean.stdout == full.stdout


def test_the_rest_client_still_works_after_lancedb_is_imported():
    code = f"""
import sys
from localgpt_cli.rag.store.lancedb_import import import_lancedb
lancedb = import_lancedb()
assert lancedb.connect and {REST_API!r} not in sys.modules
from lance_namespace_urllib3_client import ApiClient, Configuration, TableApi
import lance_namespace_urllib3_client.api.namespace_api as namespace_api
api = TableApi(ApiClient(Configuration(host="http://127.0.0.1:9")))
print(type(api).__name__, namespace_api.NamespaceApi.__name__, {REST_API!r} in sys.modules)
"""
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "TableApi NamespaceApi True\n"


def test_pyarrow_sees_pandas_again_when_asked():
    """After lancedb's import pyarrow takes pandas for missing in its quick checks (a
    Series' NaN would not be a null); `pyarrow_sees_pandas` makes it look again. The
    import's objects are out of the garbage collector's sight, and it runs again."""
    code = """
import gc, sys
from localgpt_cli.rag.store.lancedb_import import import_lancedb, pyarrow_sees_pandas
import_lancedb()
print('pandas' in sys.modules, gc.isenabled(), gc.get_freeze_count() > 10000)
pyarrow_sees_pandas()
import pandas, pyarrow
print('pandas' in sys.modules, pyarrow.array(pandas.Series([1.5, None])).null_count)
"""
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "False True True\nTrue 1\n"


# -- the mechanism itself, on a package of our own ---------------------------------------


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `deferred_pkg` whose __init__ logs that it ran, with a submodule."""
    root = tmp_path / "site" / "deferred_pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("import sys\nsys.argv.append('init ran')\nVALUE = 42\n")
    (root / "sub.py").write_text("NAME = 'sub'\n")
    monkeypatch.syspath_prepend(str(root.parent))
    monkeypatch.setattr(sys, "argv", [])
    yield root
    for name in ("deferred_pkg", "deferred_pkg.sub"):
        sys.modules.pop(name, None)


def test_a_deferred_package_runs_its_init_on_first_attribute(package):
    from localgpt_cli.rag.store.lancedb_import import defer_package_init

    defer_package_init("deferred_pkg")
    from deferred_pkg.sub import NAME

    assert NAME == "sub" and sys.argv == []
    import deferred_pkg

    assert deferred_pkg.VALUE == 42 and sys.argv == ["init ran"]
    assert deferred_pkg.sub.NAME == "sub"
    with pytest.raises(AttributeError):
        _ = deferred_pkg.MISSING
    assert sys.argv == ["init ran"]  # run once


def test_a_deferred_init_that_fails_fails_as_an_import_would(package):
    from localgpt_cli.rag.store.lancedb_import import defer_package_init

    (package / "__init__.py").write_text("raise RuntimeError('broken package')\n")
    defer_package_init("deferred_pkg")
    import deferred_pkg

    with pytest.raises(RuntimeError, match="broken package"):
        _ = deferred_pkg.VALUE
    assert "deferred_pkg" not in sys.modules


def test_deferring_a_missing_package_does_nothing():
    from localgpt_cli.rag.store.lancedb_import import defer_package_init

    defer_package_init("no_such_package_anywhere")
    assert "no_such_package_anywhere" not in sys.modules
