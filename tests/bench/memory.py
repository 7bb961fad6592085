"""Conversation-memory selection at 1,000 turns (kernel/memory.py).

Run: python -m tests.bench.memory [--turns 1000] [--runs 21]
A generated conversation (a user question of ~25 words and an answer of ~120 each turn,
drawn from a 2,000-word vocabulary, one fact planted 57 turns back, as in the figure) is
grouped into turns and selected for a question within an 8,192-token context, as
`chat -c` does after loading the messages. Timed: `episodes` + `recall` (grouping,
BM25, fading, dedup, budget), for a question matching a few turns, one matching most
turns, and with a 20 KB --file.
Loading the messages from SQLite is timed apart (it was there before memory). Target:
selection <= 20 ms (median) at 1,000 turns. The CPU time beside the wall time is what
the process itself spent: on a shared machine the wall time also counts waiting for a
core.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.kernel.context import prompt_budget
from localgpt_cli.kernel.memory import MemorySettings, episodes, recall

QUESTIONS = {
    "rare": "what is my build server called?",
    "common": "what did we say about the system and the data?",
}


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(2000)]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    common = ["the", "system", "data", "and", "is", "we", "it", "to", "of"]
    picked = [rng.choice(common) if rng.random() < 0.3 else rng.choice(words) for _ in range(n)]
    return " ".join(picked).capitalize() + "."


def build(path: Path, turns: int) -> str:
    rng = random.Random(17)
    words = vocabulary(rng)
    with SQLiteStore.open(path) as store:
        cid = store.create_conversation("bench").id
        for i in range(1, turns + 1):
            if i == turns - 57:
                q, a = "My build server is called atlas-7.", "Noted: atlas-7."
            else:
                q = sentence(rng, words, 25)
                a = " ".join(sentence(rng, words, 20) for _ in range(6))
            store.add_message(cid, "user", q)
            store.add_message(cid, "assistant", a)
    return cid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    budget = prompt_budget(8192, {})
    settings = MemorySettings()
    planted = args.turns - 57
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.db"
        cid = build(path, args.turns)
        with SQLiteStore.open(path) as store:
            loads, stored = [], []
            for _ in range(args.runs):
                start = time.perf_counter()
                stored = store.messages(cid)
                loads.append(time.perf_counter() - start)
    rng = random.Random(3)
    attached = [("notes.md", " ".join(sentence(rng, vocabulary(rng), 20) for _ in range(150)))]
    cases = {**{k: (q, ()) for k, q in QUESTIONS.items()},
             "rare + 20 KB --file": (QUESTIONS["rare"], attached)}  # fmt: skip
    print(f"{args.turns} turns ({len(stored)} messages), budget {budget} tokens, "
          f"median of {args.runs} runs")
    print(f"  load all messages from SQLite: {statistics.median(loads) * 1000:.1f} ms")
    for name, (question, files) in cases.items():
        times, cpu, kept = [], [], None
        for _ in range(args.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            out = recall(episodes(stored), question, budget, settings, files=files)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            kept = [e["turn"] for e in out.report["kept"]]
        assert kept is not None and (name == "common" or planted in kept), kept
        print(f"  selection, {name} question: {statistics.median(times) * 1000:.1f} ms "
              f"(CPU {statistics.median(cpu) * 1000:.1f} ms; E kept: {len(kept)} turns)")


if __name__ == "__main__":
    main()
