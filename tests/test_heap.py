"""Ingest's memory settings: the pinned mmap threshold and LanceDB's shuffle buffers."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from localgpt_cli import heap
from tests.cli import invoke

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the mmap threshold is glibc's",
)

# Frees a 1 MiB block (which, unpinned, raises glibc's threshold past 1 MiB), then asks
# for another and prints how many blocks are mmapped: 1 when the threshold stayed put.
PROBE = """
import ctypes, sys
from localgpt_cli import heap
pinned = heap.pin_mmap_threshold() if sys.argv[1] == "pin" else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
before = libc.mallinfo2().hblks
libc.free(libc.malloc(1 << 20))
block = libc.malloc(1 << 20)
print(pinned, libc.mallinfo2().hblks - before)
"""


def probe(mode: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in heap._USER_SETTINGS}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True, text=True, check=True, env={**clean, **env},
    )  # fmt: skip
    return out.stdout.strip()


@glibc
def test_pinned_threshold_keeps_large_blocks_on_mmap():
    assert probe("pin") == "True 1"
    # the control: without the pin glibc serves the second block from the heap
    assert probe("none") == "False 0"


@glibc
def test_a_user_malloc_setting_wins():
    assert probe("pin", MALLOC_MMAP_THRESHOLD_="4194304") == "False 0"


def test_ingest_pins_the_threshold(monkeypatch, isolated_env, tmp_path):
    calls: list[bool] = []
    monkeypatch.setattr(heap, "pin_mmap_threshold", lambda: calls.append(True) or True)
    (tmp_path / "a.md").write_text("# A\n\nsome text\n")
    result = invoke("ingest", str(tmp_path / "a.md"), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert calls == [True]


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("LANCE_SHUFFLE_BATCH_BYTES", 4 << 20),
        ("LANCE_DEFAULT_IO_BUFFER_SIZE", 64 << 20),
        ("LANCE_SHUFFLE_MAX_PRELOADED_OFFSETS_BYTES", 0),
    ],
)
def test_ingest_bounds_lances_buffers_unless_told(
    monkeypatch, isolated_env, tmp_path, name, default
):
    (tmp_path / "a.md").write_text("# A\n\nsome text\n")
    monkeypatch.setenv(name, "1")
    monkeypatch.delenv(name)  # restored (unset) after the test
    assert invoke("ingest", str(tmp_path / "a.md"), "--dry-run").exit_code == 0
    assert os.environ[name] == str(default)
    monkeypatch.setenv(name, "123")
    assert invoke("ingest", str(tmp_path / "a.md"), "--dry-run").exit_code == 0
    assert os.environ[name] == "123"


# What `localgpt ingest` leaves pyarrow allocating with, the run done (a dry run: the
# setting is made before anything is read).
ARROW_PROBE = """
import sys
from localgpt_cli.cli.main import main
try:
    main(["ingest", sys.argv[1], "--dry-run"])
except SystemExit as exc:
    assert not exc.code, exc.code
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize(("told", "pool"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_ingest_has_pyarrow_allocate_on_the_c_heap_unless_told(tmp_path, told, pool):
    (tmp_path / "a.md").write_text("# A\n\nsome text\n")
    env = {k: v for k, v in os.environ.items() if k != heap.ARROW_POOL[0]}
    env["LOCALGPT_HOME"] = str(tmp_path / "home")
    if told:
        env[heap.ARROW_POOL[0]] = told
    out = subprocess.run(
        [sys.executable, "-c", ARROW_PROBE, str(tmp_path / "a.md")],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == pool


# Fills the heap with 64 KiB blocks (below the mmap threshold), frees all but every 16th,
# so the free space lies between live blocks where free() cannot shrink the heap, and
# prints the resident MB before and after give_back().
TRIM_PROBE = """
import ctypes
from localgpt_cli import heap
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
blocks = [libc.malloc(64 << 10) for _ in range(3200)]
for b in blocks:
    libc.memset(b, 1, 64 << 10)
for i, b in enumerate(blocks):
    if i % 16:
        libc.free(b)
before = rss()
gave = heap.give_back()
print(gave, before, rss())
"""


@glibc
def test_give_back_returns_the_free_heap_pages():
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    gave, before, after = out[0], int(out[1]), int(out[2])
    # 200 MB written, 187.5 MB of it freed between live blocks
    assert gave == "True" and before - after > 150, out
