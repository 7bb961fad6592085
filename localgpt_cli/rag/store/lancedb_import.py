"""Importing lancedb without running the `__init__` of its REST namespace client.

`import lancedb` imports `lance_namespace`, which re-exports the pydantic models of
`lance_namespace_urllib3_client` (the generated client for a remote Lance namespace
server). Importing any submodule runs its package's `__init__` first, and that one also
imports the ten generated REST API modules, the `ApiClient` and urllib3: about half of
`import lancedb` (0.5-0.7 s on 2 cores), which a table in a folder or an object store
never uses, and which a one-shot `localgpt search` paid on every run.

`import_lancedb()` registers that package before lancedb imports it, with its `__init__`
not yet run: submodules (`.models`) import as usual, since the package's `__path__` is
set, and the first attribute asked of the package itself (`ApiClient`, `TableApi`, ...)
runs the real `__init__` then, so a later real use of the REST client still works. Nothing
of lancedb is patched; with a lancedb that no longer imports this package, or an
environment where it is missing, the call is a plain `import lancedb`.

pandas is not imported either: pyarrow's dataset module, which lancedb imports, asks
once whether pandas is there (its `pa.scalar` checks for pandas arrays), and answering
that imports all of pandas, 0.4 s of CPU, more than any search of a batch of 225
questions; lancedb itself imports pandas only when a DataFrame is used, and localgpt
never does. So while `pyarrow.dataset` imports, pandas cannot be found, and pyarrow
notes it as missing. Its conversions (`to_pandas`, `from_pandas`) look again when used;
only its quick checks (is this a pandas Series?) keep the answer, so code that hands
pyarrow pandas objects calls `pyarrow_sees_pandas()` first (the Ray engine's driver,
whose Ray Data does). A process that imported pandas before is left as it is.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"
PANDAS = "pandas"


def import_lancedb() -> ModuleType:
    """The `lancedb` module, imported with the REST client's package `__init__` deferred
    and pandas left out."""
    if "lancedb" not in sys.modules:
        defer_package_init(REST_CLIENT)
        with settled():
            with unseen(PANDAS):
                import pyarrow.dataset  # noqa: F401  (where pyarrow looks for pandas)
            import lancedb
    import lancedb

    return lancedb


@contextmanager
def settled() -> Iterator[None]:
    """Python's cyclic garbage collector paused in the block, and everything alive after
    it moved out of the collector's sight (`gc.freeze`). Importing lancedb creates
    ~100,000 objects (modules, classes, pydantic models) that live as long as the
    process: the collector ran ~150 times over them during the import and then walked
    them again in every full collection of a search: ~0.3 s of CPU of `search
    --queries` on Cranfield."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


@contextmanager
def unseen(name: str) -> Iterator[None]:
    """Package `name` cannot be imported in the block (as if it were not installed),
    unless it already is."""
    if name in sys.modules:
        yield
        return
    finder = _Unseen(name)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _Unseen:
    """A meta path finder that finds a package and its submodules missing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def pyarrow_sees_pandas() -> None:
    """Make pyarrow look for pandas again (importing it, when installed): after
    `import_lancedb` its quick checks take pandas objects for plain sequences (a
    Series' NaN is then not a null). An empty conversion is what makes it look."""
    import pyarrow

    with suppress(ImportError):  # pandas is not installed: nothing to see
        pyarrow.array([], pyarrow.int8()).to_pandas()


def defer_package_init(name: str) -> None:
    """Put package `name` in `sys.modules` without running its `__init__` until an
    attribute it does not have yet is asked for. Does nothing if it is already imported
    or cannot be found (the real import then behaves as usual)."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()

    def __getattr__(attr: str) -> Any:
        # Called only for attributes the module lacks (PEP 562): its own `__path__`,
        # `__spec__` and already imported submodules never trigger the real `__init__`.
        with lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                try:
                    spec.loader.exec_module(module)  # type: ignore[union-attr]
                except BaseException:
                    sys.modules.pop(name, None)  # as a failed import leaves it
                    raise
        return getattr(module, attr)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
