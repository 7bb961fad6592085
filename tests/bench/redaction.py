"""Redaction benchmark: what looking for secrets costs per MB, and what it adds to read_file.

    python -m tests.bench.redaction [--mb 4] [--runs 7]

Three texts of `--mb` MB: *prose* (Markdown with no secret-like word), *code* (Python and
config that says password, token and key often, with no secret), *secrets* (the same
with a fake key pair, a bearer token and a password every 40 lines). For each: our
`redact` (localgpt_cli/redact.py), and detect-secrets 1.5's default plugins over the
same lines when it is installed (`pip install detect-secrets`), the maintained detector
the patterns follow. Then read_file on a 1 MB ordinary file (one 100,000-character page
returned, so the whole file is decoded and scanned) with redaction and with it
switched off, interleaved, to show what a read costs more than before.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from localgpt_cli import redact as redact_module
from localgpt_cli.redact import redact
from localgpt_cli.tools.files import Sandbox, read_file

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


def seconds(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
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
        path = Path(tmp) / "guide.md"
        path.write_text(text_of("prose", 1.0))
        sandbox = Sandbox([tmp], tmp)

        def read() -> str:
            return read_file(sandbox, "guide.md", max_chars=100_000)

        real = redact_module.redact_part
        on, off = [], []
        for _ in range(args.runs * 3):
            on.append(seconds(read, 1))
            redact_module.redact_part = lambda text, a, b, m=0: (text[a:b], [])
            try:
                off.append(seconds(read, 1))
            finally:
                redact_module.redact_part = real
        a, b = statistics.median(on), statistics.median(off)
        print(f"read_file 1 MB ordinary file: {a * 1000:.2f} ms with redaction, "
              f"{b * 1000:.2f} ms without ({a / b:.2f}x)")


if __name__ == "__main__":
    main()
