"""The C heap setting that keeps a long `ingest` run's memory flat.

glibc serves allocations of 128 KiB and more with mmap and hands them back on free, but
each time such a block is freed it raises that threshold to the block's size (up to
32 MiB). LanceDB frees large buffers all through a run (commit batches, the compaction,
the full-text postings, the vector-index shuffle), so after the first few the threshold
sits high: later large buffers come from the heap arenas, are fragmented there, and the
freed space is kept by the process. Pinning the threshold at its default turns the
dynamic adjustment off, and large buffers go back to the system when LanceDB drops them.
Measured with `python -m tests.bench.ingest --big-mb 200`: peak RSS 487-492 MB -> 384-395 MB
for the 200 MB corpus, for ~2 s more system time in a 40 s run; the 20 MB corpus with
embeddings (and the IVF-PQ index of the time), 805 MB -> 646 MB. A fixed 1 MiB or 4 MiB
threshold kept 409 and 419 MB.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_MMAP_THRESHOLD = -3  # mallopt parameter number, from glibc's <malloc.h>
DEFAULT_MMAP_THRESHOLD = 128 * 1024
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def pin_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at its default for this process; True when it was set.

    Does nothing on other C libraries (macOS, musl: they have no such threshold or no
    mallopt) and when the user has tuned malloc through the environment, which wins.
    """
    if not sys.platform.startswith("linux") or any(v in os.environ for v in _USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD) == 1
