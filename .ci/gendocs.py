"""Write the man pages (man/) and shell completions (completions/) generated from the click
commands by `localgpt_cli/cli/docgen.py`.

Run `python .ci/gendocs.py` after changing a command or flag; `--check` exits 1 when the
committed files differ (tests/test_docs_fresh.py runs it). `pip install .` installs these
files under share/ (pyproject's data-files), and `localgpt man` / `localgpt completions`
print the same text.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from localgpt_cli.cli.docgen import COMPLETION_FILES, SCRIPTS, man_pages  # noqa: E402


def outputs() -> dict[Path, str]:
    files = {ROOT / "man" / f"{name}.1": page for name, page in man_pages().items()}
    for shell, script in SCRIPTS.items():
        files[ROOT / "completions" / COMPLETION_FILES[shell]] = script()
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any file is stale")
    args = parser.parse_args()
    wanted = outputs()
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    existing = set((ROOT / "man").glob("*.1"))
    extra = sorted(existing - set(wanted))
    if args.check:
        for p in [*stale, *extra]:
            print(f"stale: {p.relative_to(ROOT)}")
        if stale or extra:
            print("Run: python .ci/gendocs.py")
            return 1
        return 0
    for p in extra:
        p.unlink()
    for p, text in wanted.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    print(f"wrote {len(wanted)} files, removed {len(extra)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
