"""Streaming through the OpenAI-compatible provider: `chat --json -m bench:MODEL` vs a bare
httpx SSE reader and vs the `openai` SDK, all against `python -m tests.openai_standin`.

Run: python -m tests.bench.openai_streaming [--tokens 20000] [--runs 7]
Target: localgpt <= 1.3x the wall time of the 15-line httpx script (same stand-in, same
run, round-robin), as for Ollama in tests/bench/streaming.py. The SDK case answers the
issue's question of which HTTP layer to use; it runs when `openai` is installed
(`pip install openai`; not a dependency of localgpt).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.bench.common import ROOT, interleaved_medians, wall

BARE_CLIENT = """
import json, sys, httpx
body = {"model": "some-model", "stream": True,
        "messages": [{"role": "user", "content": "go"}]}
out = sys.stdout
with httpx.stream("POST", sys.argv[1] + "/chat/completions", json=body, timeout=None) as r:
    for line in r.iter_lines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        choices = json.loads(line[5:])["choices"]
        if choices:
            out.write(choices[0]["delta"].get("content") or "")
            out.flush()
"""

SDK_CLIENT = """
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="none", timeout=None)
out = sys.stdout
stream = client.chat.completions.create(model="some-model", stream=True,
                                        messages=[{"role": "user", "content": "go"}])
for chunk in stream:
    if chunk.choices:
        out.write(chunk.choices[0].delta.content or "")
        out.flush()
"""


@contextlib.contextmanager
def openai_standin(tokens: int) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.openai_standin", "--tokens",
                             str(tokens)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with openai_standin(args.tokens) as url, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(f'[providers.bench]\nkind = "openai"\nbase_url = "{url}"\n')
        os.environ.update({"LOCALGPT_CONFIG": str(config), "LOCALGPT_HOME": f"{tmp}/home",
                           "XDG_CACHE_HOME": f"{tmp}/cache"})
        cases = {
            "httpx SSE, 15 lines": lambda: wall([sys.executable, "-c", BARE_CLIENT, url]),
            "localgpt chat --json": lambda: wall([sys.executable, "-m", "localgpt_cli", "chat",
                                                  "--json", "-m", "bench:some-model", "go"]),
        }
        if importlib.util.find_spec("openai") is not None:
            cases["openai SDK, 10 lines"] = lambda: wall([sys.executable, "-c", SDK_CLIENT, url])
        medians = interleaved_medians(cases, args.runs)
    base = medians["httpx SSE, 15 lines"]
    print(f"{args.tokens} tokens, median of {args.runs} runs (round-robin):")
    for name, value in medians.items():
        print(f"  {name:22} {value:7.3f} s  {value / base:5.2f}x")
    print(json.dumps({"tokens": args.tokens, "medians_s": medians}))


if __name__ == "__main__":
    main()
