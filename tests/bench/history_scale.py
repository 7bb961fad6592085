"""History at scale on both backends: SQLite and PostgreSQL side by side (issue 17).

    python -m tests.bench.history_scale [--scale 1.0] [--repeat 30] [--json]

The SQLite database is tests/bench/history.py's (10,000 conversations and 1,000,000
messages at scale 1.0, cached under tests/.cache/). The same rows are loaded into a
PostgreSQL server that this script starts (tests/pg.py: initdb + pg_ctl in a
temporary folder, fsync off) through the store's own schema: COPY into a staging
table, then one INSERT … SELECT that builds each message's tsvector with the store's
folding (textsearch.words) and `to_tsvector('simple', …)`, then the GIN index.
Loading is the fixture, not the measurement; its time is printed.

Each operation is measured in process on an open store, as `history list` and
`history search` run after start-up: the median over --repeat runs. The search words
are the rare, mid-frequency and common words of history.py. The whole `localgpt
history list|search` command (a new Python process each run) is measured too, on both
backends, since that is what a person waits for.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from localgpt_cli.history.pg_schema import SCHEMA_VERSION
from localgpt_cli.history.postgres import PostgresStore
from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.history.textsearch import words
from tests import pg
from tests.bench.common import wall
from tests.bench.history import SEARCH_RANKS, Corpus, database, longest, median_ms, plan

TARGETS_MS = {"list": 50.0, "search": 200.0}
PG_INDEX = "CREATE INDEX localgpt_messages_search ON localgpt_messages USING GIN (search)"


def load_postgres(sqlite_path: Path, url: str) -> float:
    """Copy every conversation and message of the SQLite file into the (new) database at
    `url`; returns the seconds it took."""
    import psycopg

    began = time.perf_counter()
    PostgresStore.open(url).close()  # the schema, at SCHEMA_VERSION
    src = sqlite3.connect(f"{sqlite_path.resolve().as_uri()}?mode=ro", uri=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX localgpt_messages_search")
        conn.execute("SET maintenance_work_mem = '256MB'")
        with conn.cursor().copy(
            "COPY localgpt_conversations (id, title, model, created_at, updated_at,"
            " message_count, metadata) FROM STDIN"
        ) as copy:
            for row in src.execute("SELECT id, title, model, created_at, updated_at,"
                                   " message_count, metadata FROM conversations"):
                copy.write_row(row)
        conn.execute("CREATE UNLOGGED TABLE staging (id text, conversation_id text, seq int,"
                     " role text, content text, metadata text, created_at text, folded text)")
        with conn.cursor().copy("COPY staging FROM STDIN") as copy:
            for row in src.execute("SELECT id, conversation_id, seq, role, content, metadata,"
                                   " created_at FROM messages ORDER BY pk"):
                copy.write_row((*row, " ".join(words(row[4]))))
        conn.execute(
            "INSERT INTO localgpt_messages (id, conversation_id, seq, role, content, metadata,"
            " created_at, search) SELECT id, conversation_id, seq, role, content,"
            " metadata::jsonb, created_at, to_tsvector('simple', folded) FROM staging")
        conn.execute("DROP TABLE staging")
        conn.execute(PG_INDEX)
        conn.execute("VACUUM ANALYZE")
    src.close()
    return time.perf_counter() - began


def operations(store: Any, long_id: str, search_words: dict[str, str],
               repeat: int) -> dict[str, float]:
    ms = {
        "list": median_ms(lambda: store.list_conversations(limit=20), repeat),
        "resolve": median_ms(lambda: store.resolve(long_id[:10]), repeat),
        "window": median_ms(lambda: store.messages(long_id, last=20), repeat),
    }
    for label, word in search_words.items():
        ms[f"search_{label}"] = median_ms(functools.partial(store.search, word), repeat)
    return ms


def command_ms(env: dict[str, str], args: list[str], runs: int) -> float:
    samples = [wall([sys.executable, "-m", "localgpt_cli", *args], env) for _ in range(runs)]
    return statistics.median(samples) * 1000


def bench(scale: float, repeat: int) -> dict[str, Any]:
    sqlite_path = database(scale)
    conversations, messages, _ = plan(scale)
    corpus = Corpus(seed=7)
    search_words = {label: corpus.words[rank] for label, rank in SEARCH_RANKS.items()}
    long_id = longest(sqlite_path)
    bin_dir = pg.binaries()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
    server = pg.Server(bin_dir).start()
    try:
        server.admin("CREATE DATABASE bench")
        url = server.url("bench")
        load_s = load_postgres(sqlite_path, url)
        result: dict[str, Any] = {"scale": scale, "conversations": conversations,
                                  "messages": messages, "postgres_load_s": round(load_s, 1),
                                  "search_words": search_words, "ms": {}}  # fmt: skip
        with SQLiteStore.open(sqlite_path) as store:
            result["ms"]["sqlite"] = operations(store, long_id, search_words, repeat)
        with PostgresStore.open(url) as store:
            assert store.get(long_id).messages == SQLiteStore.open(sqlite_path).get(
                long_id).messages
            result["ms"]["postgres"] = operations(store, long_id, search_words, repeat)
        home = sqlite_path.parent / "bench-home"
        home.mkdir(exist_ok=True)
        (home / "history.db").unlink(missing_ok=True)
        os.symlink(sqlite_path.resolve(), home / "history.db")
        runs = max(3, repeat // 5)
        for name, env in (("sqlite", {"LOCALGPT_HOME": str(home), "LOCALGPT_HISTORY_URL": ""}),
                          ("postgres", {"LOCALGPT_HISTORY_URL": url})):
            result["ms"][name]["cli_list"] = command_ms(env, ["history", "list"], runs)
            result["ms"][name]["cli_search"] = command_ms(
                env, ["history", "search", search_words["common"]], runs)
        return result
    finally:
        server.stop()


ROWS = [("list", "list_conversations(limit=20)", "list"),
        ("resolve", "resolve(10-char prefix)", None),
        ("window", "messages(long, last=20)", None),
        ("search_rare", "search rare word", "search"),
        ("search_mid", "search mid-frequency word", "search"),
        ("search_common", "search common word", "search"),
        ("cli_list", "`localgpt history list` (process)", None),
        ("cli_search", "`localgpt history search common` (process)", None)]  # fmt: skip


def table(r: dict[str, Any]) -> str:
    lines = [["median ms", "sqlite", "postgres", "target"]]
    for key, label, target in ROWS:
        lines.append([label, f"{r['ms']['sqlite'][key]:.2f}", f"{r['ms']['postgres'][key]:.2f}",
                      f"<= {TARGETS_MS[target]:g}" if target else ""])
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(line, widths, strict=True)))
           for line in lines]  # fmt: skip
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append(f"{r['conversations']:,} conversations, {r['messages']:,} messages; "
               f"PostgreSQL {SCHEMA_VERSION=} loaded in {r['postgres_load_s']} s; "
               f"words {r['search_words']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0: 1,000,000 messages")
    parser.add_argument("--repeat", type=int, default=30, help="runs per operation")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    result = bench(args.scale, args.repeat)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
