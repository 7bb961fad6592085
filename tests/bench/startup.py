"""Start-up time: `localgpt --help` and `--version` against `python -c "import click"`.

Run: python -m tests.bench.startup [--runs 10]
The target is a median ratio <= 2.5x; both sides are measured round-robin in one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from tests.bench.common import interleaved_medians, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    exe = shutil.which("localgpt") or f"{sys.prefix}/bin/localgpt"
    cases = {
        "python -c 'import click'": lambda: wall([sys.executable, "-c", "import click"]),
        "localgpt --help": lambda: wall([exe, "--help"]),
        "localgpt --version": lambda: wall([exe, "--version"]),
        "localgpt chat --help": lambda: wall([exe, "chat", "--help"]),
    }
    for fn in cases.values():  # warm the page cache once
        fn()
    medians = interleaved_medians(cases, args.runs)
    base = medians["python -c 'import click'"]
    if args.json:
        print(json.dumps({k: {"median_s": v, "ratio": v / base} for k, v in medians.items()}))
        return
    print(f"{'command':28} {'median ms':>10} {'x import click':>15}")
    for name, value in medians.items():
        print(f"{name:28} {value * 1000:10.1f} {value / base:15.2f}")


if __name__ == "__main__":
    main()
