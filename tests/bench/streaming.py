"""Streaming: 20,000 tokens through `localgpt chat --json` vs the bare `ollama` client.

Run: python -m tests.bench.streaming [--tokens 20000] [--runs 5]
Targets: localgpt <= 1.3x the wall time of a 15-line script using the `ollama` client
directly (same stand-in, same run, round-robin), and the kernel alone (normalizer + NDJSON
writer, in process) >= 200,000 packets/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from tests.bench.common import interleaved_medians, standin_process, wall

BARE_CLIENT = """
import sys, ollama
client = ollama.Client()
out = sys.stdout
for chunk in client.chat(model="llama3.2", messages=[{"role": "user", "content": "go"}],
                         stream=True):
    out.write(chunk.message.content or "")
    out.flush()
"""


def kernel_rate(n: int) -> float:
    """Packets per second through Normalizer.feed + NDJSONWriter.write to /dev/null."""
    from ollama import ChatResponse, Message

    from localgpt_cli.kernel.normalize import Normalizer
    from localgpt_cli.kernel.packets import PacketFactory
    from localgpt_cli.render.ndjson import NDJSONWriter

    chunks = [
        ChatResponse(model="m", message=Message(role="assistant", content="tok "), done=False)
        for _ in range(n)
    ]
    with open(os.devnull, "wb") as sink:
        writer = NDJSONWriter(sink)
        normalizer = Normalizer(PacketFactory())
        start = time.perf_counter()
        for chunk in chunks:
            for packet in normalizer.feed(chunk):
                writer.write(packet)
        elapsed = time.perf_counter() - start
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with standin_process("--tokens", str(args.tokens)) as url:
        env = {
            "OLLAMA_HOST": url,
            "LOCALGPT_HOME": "/tmp/localgpt-bench",
            "XDG_CACHE_HOME": "/tmp/localgpt-bench/cache",
        }
        os.environ.update(env)
        cases = {
            "ollama client, 15 lines": lambda: wall([sys.executable, "-c", BARE_CLIENT]),
            "localgpt chat --json": lambda: wall(
                [sys.executable, "-m", "localgpt_cli", "chat", "--json", "go"]
            ),
            "localgpt chat (plain)": lambda: wall(
                [sys.executable, "-m", "localgpt_cli", "chat", "go"]
            ),
        }
        medians = interleaved_medians(cases, args.runs)
    rates = [kernel_rate(200_000) for _ in range(3)]
    base = medians["ollama client, 15 lines"]
    print(f"{args.tokens} tokens, median of {args.runs} runs (round-robin):")
    for name, value in medians.items():
        print(f"  {name:26} {value:7.3f} s  {value / base:5.2f}x")
    print(f"  kernel alone (normalizer + NDJSON writer): {statistics.median(rates):,.0f} packets/s")
    print(
        json.dumps(
            {
                "tokens": args.tokens,
                "medians_s": medians,
                "kernel_packets_per_s": statistics.median(rates),
            }
        )
    )


if __name__ == "__main__":
    main()
