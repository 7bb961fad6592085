"""Helpers for knowledge-base tests: a small mixed corpus and a look at what is stored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.pdfgen import make_pdf

WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
]  # fmt: skip


def paragraph(n: int, words: int = 30) -> str:
    """A deterministic paragraph whose words (e.g. `kilo7`) are unique to paragraph n."""
    return " ".join(f"{WORDS[(n * 7 + i) % len(WORDS)]}{n}" for i in range(words)) + "."


def make_corpus(root: Path) -> Path:
    """notes/: markdown, code, text and a two-page PDF, each with findable words."""
    notes = root / "notes"
    (notes / "code").mkdir(parents=True)
    (notes / "vpn.md").write_text(
        "# VPN\n\nTo set up the VPN, install wireguard and import the office profile.\n\n"
        "## Troubleshooting\n\nIf the tunnel drops, restart the wireguard service.\n"
    )
    (notes / "code" / "retry.py").write_text(
        "import time\n\n\ndef retry(fn, attempts=3):\n"
        '    """Call fn with exponential backoff."""\n'
        "    for i in range(attempts):\n        try:\n            return fn()\n"
        "        except OSError:\n            time.sleep(2 ** i)\n"
    )
    (notes / "todo.txt").write_text("Buy oat milk.\nRenew the passport before the trip.\n")
    make_pdf(
        notes / "manual.pdf",
        ["The zebra crossing manual, page one.", "Page two explains quasar observations."],
    )
    return notes


def long_markdown(paragraphs: int = 14, first: int = 0, title: str = "Long") -> str:
    body = "\n\n".join(paragraph(n) for n in range(first, first + paragraphs))
    return f"# {title}\n\n{body}\n"


def home() -> Path:
    return Path(os.environ["LOCALGPT_HOME"])


def snapshot(home_dir: Path, collection: str = "default") -> list[tuple[Any, ...]]:
    """Every stored row as (chunk id, document id, path, text, has a vector), sorted."""
    from localgpt_cli.rag.store import open_store

    coll = open_store(home_dir / "lancedb").collection(collection)
    columns = ["chunk_id", "document_id", "path", "text"]
    has_vector = coll.has_vector_column()
    table = coll.table.to_arrow()
    out = []
    for row in table.select(columns + (["vector"] if has_vector else [])).to_pylist():
        vector = row.get("vector")
        out.append((*(row[c] for c in columns), vector is not None))
    return sorted(out)


def table_version(home_dir: Path, collection: str = "default") -> int:
    from localgpt_cli.rag.store import open_store

    return open_store(home_dir / "lancedb").collection(collection).version


def embed_bodies(standin: Any) -> list[dict[str, Any]]:
    return [r.body for r in standin.requests if r.path == "/api/embed"]
