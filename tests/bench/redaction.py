"""Redaction benchmark: what looking for secrets costs per MB, and what it adds to read_file.

    python -m tests.bench.redaction [--mb 4] [--runs 7] [--baseline 1a03c35]

Three texts of `--mb` MB: *prose* (Markdown with no secret-like word), *code* (Python and
config that says password, token and key often, with no secret), *secrets* (the same
with a fake key pair, a bearer token and a password every 40 lines). For each: our
`redact` (localgpt_cli/redact.py), and detect-secrets 1.5's default plugins over the
same lines when it is installed (`pip install detect-secrets`), the maintained detector
the patterns follow (on a quarter MB, scaled: it is slow). Then read_file with redaction
and with it switched off, interleaved, to show what a read costs more than before:
through the tool as the model calls it, at the default page of 20,000 characters, on a
1 MB and a 10 KB file. Last, the same reads against the code of `--baseline` (the commit
before the secrets rules and redaction, exported with `git archive`), each in its own
process, interleaved: what "a read costs no more than today" is measured against.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from localgpt_cli import redact as redact_module
from localgpt_cli.redact import redact
from localgpt_cli.tools.files import file_tools

PROSE = (
    "## Installing\n\nThe command line reads its settings from the config file, then "
    "the environment, then the flags. Each chapter of the guide says what it covers and "
    "where to look next; the index lists every command with one line about it.\n\n"
)
CODE = (
    "def login(user: str, password_field: str) -> bool:\n"
    "    # the token is checked against the key store; see the password policy\n"
    "    return check(user, lookup(password_field), ttl=30)\n"
    "api_key_name = os.environ.get('API_KEY_NAME')\n"
)
SECRETS = (
    "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    'headers = {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8"}\n'
    'db_password = "hunter2-but-longer"\n'
)


def text_of(kind: str, mb: float) -> str:
    size = int(mb * 1024 * 1024)
    if kind == "prose":
        unit = PROSE
    elif kind == "code":
        unit = CODE * 10
    else:
        unit = CODE * 9 + SECRETS
    return (unit * (size // len(unit) + 1))[:size]


def seconds(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter
            ) -> float:
    samples = []
    for _ in range(runs):
        start = clock()
        fn()
        samples.append(clock() - start)
    return statistics.median(samples)


def detect_secrets_scan() -> Callable[[str], int] | None:
    """detect-secrets' default plugins over each line, as its `scan_line` does."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(text: str) -> int:
        with default_settings():
            return sum(len(list(scan_line(line))) for line in text.splitlines())

    return scan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", default="1a03c35",
                        help="the commit to compare read_file with (before issue 29)")
    args = parser.parse_args()
    scan = detect_secrets_scan()
    for kind in ("prose", "code", "secrets"):
        text = text_of(kind, args.mb)
        ours = seconds(lambda text=text: redact(text), args.runs) / args.mb
        found = len(redact(text)[1])
        line = f"{kind:8} redact: {ours * 1000:8.1f} ms/MB ({found} found)"
        if scan is not None:
            sample = text[: 256 * 1024]  # detect-secrets is slow: a quarter MB, scaled
            theirs = seconds(lambda sample=sample: scan(sample), 1) * 4
            line += f"   detect-secrets: {theirs * 1000:8.1f} ms/MB ({theirs / ours:.0f}x)"
        print(line)
    with tempfile.TemporaryDirectory() as tmp:
        for name, mb in (("guide.md", 1.0), ("small.md", 0.01)):
            Path(tmp, name).write_text(text_of("prose", mb))
            on, off = read_costs(Path(tmp), name, args.runs * 40)
            print(f"read_file {name} ({mb:g} MB, default page): {on * 1000:.3f} ms CPU with "
                  f"redaction, {off * 1000:.3f} ms without ({on / off:.3f}x)")
        against_baseline(Path(tmp), args.baseline, args.runs)


def read_costs(folder: Path, name: str, runs: int) -> tuple[float, float]:
    """Median CPU seconds of a read_file call as the model makes it (Tool.run: arguments
    checked, stdout captured), with redaction and with it switched off, interleaved; CPU
    time, because on a shared machine the wall clock mostly measures the neighbours."""
    tool = {t.name: t for t in file_tools([folder], folder)}["read_file"]
    real = redact_module.redact_part

    def off(text: str, start: int, stop: int, margin: int = 0) -> tuple[str, list]:
        return text[start:stop], []

    on_s, off_s = [], []
    try:
        for _ in range(runs):
            redact_module.redact_part = real
            on_s.append(seconds(lambda: tool.run({"path": name}), 1, time.process_time))
            redact_module.redact_part = off
            off_s.append(seconds(lambda: tool.run({"path": name}), 1, time.process_time))
    finally:
        redact_module.redact_part = real
    return statistics.median(on_s), statistics.median(off_s)

# One process's median CPU time of read_file over a folder, for each file named.
_CHILD = """
import statistics, sys, time
from pathlib import Path
from localgpt_cli.tools.files import file_tools
folder = Path(sys.argv[1])
tool = {t.name: t for t in file_tools([folder], folder)}["read_file"]
for name in sys.argv[2:]:
    tool.run({"path": name})
    samples = []
    for _ in range(200):
        start = time.process_time()
        tool.run({"path": name})
        samples.append(time.process_time() - start)
    print(name, statistics.median(samples))
"""


def against_baseline(folder: Path, baseline: str, rounds: int) -> None:
    """read_file's CPU per call in this checkout and in `baseline`'s code, alternating
    processes, medians of `rounds` rounds."""
    here = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "-C", str(here), "archive", baseline],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        names = ["guide.md", "small.md"]
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for label, code in (("baseline", old), ("now", str(here))):
                env = {**os.environ, "PYTHONPATH": code}
                out = subprocess.run([sys.executable, "-c", _CHILD, str(folder), *names],
                                     capture_output=True, text=True, check=True, env=env,
                                     cwd=code).stdout
                for line in out.splitlines():
                    name, value = line.split()
                    times.setdefault((label, name), []).append(float(value))
    for name in names:
        base = statistics.median(times[("baseline", name)])
        now = statistics.median(times[("now", name)])
        print(f"read_file {name} against {baseline}: {now * 1000:.3f} ms CPU now, "
              f"{base * 1000:.3f} ms before ({now / base:.3f}x)")


if __name__ == "__main__":
    main()
