"""Limit OpenBLAS threads around the NumPy forward pass.

Measured on the 2-core machine: when any other process is busy, NumPy's default two BLAS
threads spin-wait for each other and a forward pass runs 3-8x slower than on one thread
(20 vs 2.5-8 vectors/s); idle, two threads gain about 40%. So the local embedder
(llm/local.py) runs one BLAS thread per batch and as many batches at once as there are
cores, and the tests' stand-in embeds on one thread beside the CLI under test. NumPy offers
no API for this, so the OpenBLAS library it loaded is found in the process's memory map
and called through ctypes; anywhere that fails (another BLAS, not Linux) this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from typing import Any

_lib: Any = None
_looked = False


def _openblas() -> Any:
    global _lib, _looked
    if not _looked:
        _looked = True
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = [line.split()[-1] for line in maps if "openblas" in line.lower()]
            if paths:
                lib = ctypes.CDLL(paths[0])
                setter = lib.openblas_set_num_threads_local
                setter.argtypes = [ctypes.c_int]
                setter.restype = ctypes.c_int
                _lib = lib
        except (OSError, AttributeError):
            _lib = None
    return _lib


@contextlib.contextmanager
def blas_threads(count: int | None) -> Iterator[None]:
    """Run the block with `count` OpenBLAS threads (None: leave as is), then restore."""
    lib = _openblas() if count else None
    if lib is None:
        yield
        return
    previous = lib.openblas_set_num_threads_local(count)
    try:
        yield
    finally:
        lib.openblas_set_num_threads_local(previous)
