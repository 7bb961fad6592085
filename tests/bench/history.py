"""History store benchmark: the figures of issue 3 on a heavy user's database.

    python -m tests.bench.history [--scale 0.1,1.0] [--repeat 50] [--json]

At scale 1.0 the database holds 10,000 conversations and 1,000,000 messages, one
conversation of 10,000 messages (the context-window case) and ~99 in each of the
others; scale 0.1 has 10x fewer of everything, to show how the costs grow. Message
text is drawn from a 20,000-word made-up vocabulary with Zipf frequencies, like
language: a few words are everywhere, most are rare. Search is measured for a rare,
a mid-frequency and a common word (how many messages each matches is printed).

The database is the fixture, not the measurement: it is bulk-loaded with executemany
in one transaction (through the store's own schema and triggers) and cached under
tests/.cache/, keyed by scale and schema version, so re-runs start at once.
Each operation runs in process on an open store with a warm page cache, as `history
list` or a `chat -c` turn would after start-up; the figure is the median over
`--repeat` runs (add_message: the median of 200 appends, each committed).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from localgpt_cli.history.integrity import MARKER_SUFFIX
from localgpt_cli.history.rows import iso
from localgpt_cli.history.schema import SCHEMA_VERSION
from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.ids import encode, new_id

CACHE = Path(__file__).resolve().parent.parent / ".cache"
GENERATOR_VERSION = 2  # bump when the generated data changes, to invalidate the cache
FULL_CONVERSATIONS = 10_000
FULL_MESSAGES = 1_000_000
FULL_BIG = 10_000  # messages in the one long conversation
VOCABULARY = 20_000
# Zipf ranks of the words searched for: common, mid-frequency, rare.
SEARCH_RANKS = {"common": 20, "mid": 300, "rare": 5000}
APPENDS = 200
TARGETS_MS = {"list": 50.0, "window": 20.0, "search": 100.0, "add_message": 2.0}
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def vocabulary(rng: random.Random) -> list[str]:
    """VOCABULARY distinct pronounceable made-up words, in a fixed order (rank order)."""
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "oo"]
    words: dict[str, None] = {}
    while len(words) < VOCABULARY:
        syllables = rng.randint(1, 3)
        words["".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables))] = None
    return list(words)


class Corpus:
    """Deterministic message texts with Zipf-distributed words."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng)
        self.cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(VOCABULARY)))

    def text(self, role: str) -> str:
        n = self.rng.randint(4, 20) if role == "user" else self.rng.randint(10, 70)
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=n))


def plan(scale: float) -> tuple[int, int, int]:
    """(conversations, messages, messages in the long conversation) at this scale."""
    return (
        max(2, round(FULL_CONVERSATIONS * scale)),
        max(4, round(FULL_MESSAGES * scale)),
        max(2, round(FULL_BIG * scale)),
    )


def build(path: Path, scale: float) -> None:
    """Create the schema with the store, then bulk-load rows with the store's triggers on."""
    conversations, messages, big = plan(scale)
    SQLiteStore.open(path).close()
    corpus = Corpus(seed=7)
    rng = random.Random(11)
    rest = messages - big
    per = [big] + [
        rest // (conversations - 1) + (1 if i < rest % (conversations - 1) else 0)
        for i in range(conversations - 1)
    ]
    starts = [START + timedelta(seconds=rng.uniform(0, 365 * 86400)) for _ in per]
    starts[0] = START  # the long conversation has been going on all year
    step = timedelta(seconds=30)
    # Ids as they would have been made when each conversation started, so that prefixes
    # are as (un)ambiguous as in real use.
    conv_ids = [
        encode((int(start.timestamp() * 1000) << 80) | rng.getrandbits(80)) for start in starts
    ]
    conv_rows = [
        (cid, f"conversation {i}", "qwen3:8b", iso(start), iso(start + step * max(0, n - 1)))
        for i, (cid, start, n) in enumerate(zip(conv_ids, starts, per, strict=True))
    ]

    def message_rows() -> Iterator[tuple[Any, ...]]:
        for cid, start, n in zip(conv_ids, starts, per, strict=True):
            for seq in range(n):
                role = "user" if seq % 2 == 0 else "assistant"
                meta = '{"done_reason":"stop","usage":{"completion_tokens":42}}'
                yield (
                    new_id(), cid, seq, role, corpus.text(role),
                    "{}" if role == "user" else meta, iso(start + step * seq),
                )  # fmt: skip

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO conversations (id, title, model, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?)",
            conv_rows,
        )
        conn.executemany(
            "INSERT INTO messages (id, conversation_id, seq, role, content, metadata,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            message_rows(),
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def database(scale: float) -> Path:
    """The cached database for this scale, built on first use."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"history-s{scale:g}-v{SCHEMA_VERSION}-g{GENERATOR_VERSION}.db"
    if not path.exists():
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            staging = Path(tmp) / "history.db"
            began = time.perf_counter()
            build(staging, scale)
            print(
                f"built {path.name} in {time.perf_counter() - began:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            os.replace(staging, path)
    return path


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm the page cache and the statement cache
    samples = []
    for _ in range(repeat):
        began = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - began) / 1e6)
    return statistics.median(samples)


def peek(path: Path, query: str, *params: object) -> Any:
    """One value read straight from the file (facts about the fixture, not measured)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(query, params).fetchone()[0]
    finally:
        conn.close()


def longest(path: Path) -> str:
    return str(peek(path, "SELECT id FROM conversations ORDER BY message_count DESC LIMIT 1"))


def matches(path: Path, word: str) -> int:
    query = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    return int(peek(path, query, f'"{word}"'))


def first_write_ms(path: Path, *, marked: bool) -> float:
    """Open the store and commit its first write: with the whole-file check when the file
    is not recorded as left whole (integrity.py), without it when it is."""
    if not marked:
        path.with_name(path.name + MARKER_SUFFIX).unlink(missing_ok=True)
    began = time.perf_counter_ns()
    with SQLiteStore.open(path) as store:
        conversation = store.create_conversation("bench")
        elapsed = (time.perf_counter_ns() - began) / 1e6
        store.delete([conversation.id])  # closing records the file as left whole again
    return elapsed


def bench_scale(scale: float, repeat: int) -> dict[str, Any]:
    path = database(scale)
    conversations, messages, big = plan(scale)
    words = Corpus(seed=7).words
    result: dict[str, Any] = {
        "scale": scale,
        "conversations": conversations,
        "messages": messages,
        "long_conversation": big,
        "db_mb": round(path.stat().st_size / 1e6, 1),
        "ms": {},
        "search_matches": {},
    }
    ms = result["ms"]
    ms["open"] = median_ms(lambda: SQLiteStore.open(path).close(), repeat)
    runs = max(3, repeat // 10)
    ms["first_write"] = statistics.median(
        first_write_ms(path, marked=False) for _ in range(runs))
    ms["first_write_marked"] = statistics.median(
        first_write_ms(path, marked=True) for _ in range(runs))
    with SQLiteStore.open(path) as store:
        long_id = longest(path)
        assert store.get(long_id).messages == big
        ms["list"] = median_ms(lambda: store.list_conversations(limit=20), repeat)
        ms["resolve"] = median_ms(lambda: store.resolve(long_id[:10]), repeat)
        ms["window"] = median_ms(lambda: store.messages(long_id, last=20), repeat)
        ms["all_long"] = median_ms(lambda: store.messages(long_id), max(3, repeat // 10))
        for label, rank in SEARCH_RANKS.items():
            word = words[rank]
            result["search_matches"][label] = {"word": word, "messages": matches(path, word)}
            ms[f"search_{label}"] = median_ms(functools.partial(store.search, word), repeat)
        corpus = Corpus(seed=99)
        conv = store.create_conversation("bench")
        samples = []
        for i in range(APPENDS):
            text = corpus.text("user" if i % 2 == 0 else "assistant")
            began = time.perf_counter_ns()
            store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text)
            samples.append((time.perf_counter_ns() - began) / 1e6)
        store.delete([conv.id])
        ms["add_message"] = statistics.median(samples)
        result["add_message_p95_ms"] = statistics.quantiles(samples, n=20)[-1]
    return result


ROWS = [
    ("open", "SQLiteStore.open + close", None),
    ("first_write", "open + first write (whole-file check)", None),
    ("first_write_marked", "open + first write (file left checked)", None),
    ("list", "list_conversations(limit=20)", "list"),
    ("resolve", "resolve(10-char prefix)", None),
    ("window", "messages(long, last=20)", "window"),
    ("all_long", "messages(long) all", None),
    ("search_rare", "search rare word", "search"),
    ("search_mid", "search mid-frequency word", "search"),
    ("search_common", "search common word", "search"),
    ("add_message", "add_message (committed)", "add_message"),
]


def table(results: list[dict[str, Any]]) -> str:
    head = ["median ms"] + [
        f"{r['conversations']:,} conv / {r['messages']:,} msg" for r in results
    ] + ["target"]  # fmt: skip
    lines = [head]
    for key, label, target in ROWS:
        cells = [label] + [f"{r['ms'][key]:.2f}" for r in results]
        lines.append(cells + [f"<= {TARGETS_MS[target]:g}" if target else ""])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    out.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        found = ", ".join(
            f"{label} {m['word']!r} in {m['messages']:,}"
            for label, m in r["search_matches"].items()
        )
        out.append(
            f"scale {r['scale']:g}: long conversation {r['long_conversation']:,} messages, "
            f"db {r['db_mb']} MB; search words: {found}; "
            f"add_message p95 {r['add_message_p95_ms']:.2f} ms"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="0.1,1.0", help="comma-separated scales")
    parser.add_argument("--repeat", type=int, default=50, help="runs per operation")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = [bench_scale(float(s), args.repeat) for s in args.scale.split(",")]
    if args.json:
        print(json.dumps({"benchmark": "history", "results": results}, indent=2))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
