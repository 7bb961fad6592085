"""The memory settings that keep a long `ingest` run flat: the C heap's, and Lance's buffers.

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

Lance's buffers are environment variables it reads when it first needs them; `ingest` sets
them before lancedb is imported (see LANCE_BUFFERS), unless the user has set them.

pyarrow allocates through its own mimalloc by default, which keeps the pages freed by the
threads that build each commit's rows (~35 MB at 60 MB of corpus, growing with the run);
`ingest` has pyarrow use the C heap instead (`ARROW_POOL`), whose large blocks go back
at once (the pinned threshold) and whose free pages `give_back()` returns before the
vector-index build.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_MMAP_THRESHOLD = -3  # mallopt parameter number, from glibc's <malloc.h>
DEFAULT_MMAP_THRESHOLD = 128 * 1024
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
# Read by pyarrow once, when it is imported.
ARROW_POOL = ("ARROW_DEFAULT_MEMORY_POOL", "system")

# Measured on 460,000 768-d vectors, the 200 MB corpus's (a table built alone: the index
# build's peak above the process before it), and with `python -m tests.bench.ingest_workers
# --memory` (README, Performance).
LANCE_BUFFERS = {
    # The vector-index build shuffles rows through buffers of this size; LanceDB's default
    # (128 MiB) held ~115 MB more at the end of a 460k-chunk run, for the same build time.
    "LANCE_SHUFFLE_BATCH_BYTES": 4 << 20,
    # Lance reads ahead of a scan up to this many bytes (default 2 GiB). The index build
    # scans every vector and consumes them slower than a local disk delivers them, so the
    # read-ahead filled for the whole shuffle: ~390 MB above the process by default, ~195 MB
    # at 64 MiB (~150 MB at 16 MiB, no lower peak), and the build took 238 s, not 437 s.
    "LANCE_DEFAULT_IO_BUFFER_SIZE": 64 << 20,
    # With the shuffle's partition offsets in memory (up to 256 MiB by default), its reader
    # decodes up to 128 MiB of partitions at a time to build them; without (0, documented
    # as "disables offset preloading"), it reads one partition at a time, in the same time.
    # The build's last step went from +298 to +127 MB above the process, under the
    # shuffle's; the peak is now the k-means training on its sample (+273 MB).
    "LANCE_SHUFFLE_MAX_PRELOADED_OFFSETS_BYTES": 0,
}


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


def bound_lance_buffers() -> None:
    """Set LANCE_BUFFERS in the environment, except those the user has set."""
    for name, value in LANCE_BUFFERS.items():
        os.environ.setdefault(name, str(value))


def arrow_on_the_c_heap() -> None:
    """Have pyarrow allocate with malloc (ARROW_POOL), unless the user chose its pool."""
    name, value = ARROW_POOL
    if name in os.environ:
        return
    os.environ[name] = value
    if "pyarrow" in sys.modules:  # read at its import: set the pool itself
        import pyarrow

        pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def give_back() -> bool:
    """Return the free pages of every C heap arena to the system (glibc's malloc_trim);
    True when it returned some.

    Called between the compaction and the vector-index build, whose peak sits on top of
    what the process holds then: the compaction and the full-text index free tens of MB
    in the arenas (13-28 MB at 60 MB of corpus) that glibc keeps unless asked.
    Does nothing on other C libraries.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim(0) == 1
