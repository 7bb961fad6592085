"""Ingest a labelled collection (Cranfield or click's docs) with the real all-MiniLM-L6-v2
served by the stand-in, through the real CLI; shared by the ranking and gate benchmarks.

    python -m tests.bench.labelled clickdocs DIR     # build it in DIR (kept)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.bench.retrieval import MODEL, localgpt, records

COLLECTIONS = ("cranfield", "clickdocs")


def data_dir(name: str) -> Path:
    from tests import clickdocs, cranfield

    return {"cranfield": cranfield.DATA_DIR, "clickdocs": clickdocs.DATA_DIR}[name]


def write_corpus(name: str, dest: Path) -> None:
    from tests import clickdocs, cranfield

    {"cranfield": cranfield, "clickdocs": clickdocs}[name].write_corpus_files(dest)


@contextmanager
def served_model() -> Iterator[tuple[str, Any]]:
    """The stand-in serving the cached NumPy MiniLM as `all-minilm`: (url, embedder)."""
    from tests.embedder import shared_embedder
    from tests.standin import StandIn

    embedder = shared_embedder()
    server = StandIn().start()
    server.set_embedder(f"{MODEL}:latest", embedder.embed)
    try:
        yield server.url, embedder
    finally:
        server.stop()


def environment(work: Path, url: str) -> dict[str, str]:
    env = {**os.environ, "LOCALGPT_HOME": str(work / "home"), "OLLAMA_HOST": url,
           "LOCALGPT_EMBED_MODEL": MODEL, "XDG_CONFIG_HOME": str(work / "config"),
           "XDG_CACHE_HOME": str(work / "cache")}  # fmt: skip
    for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_CONFIG"):
        env.pop(var, None)
    return env


def build(name: str, work: Path, env: dict[str, str]) -> Path:
    """Ingest collection `name` (as collection `name`) unless `work` already holds it."""
    home = work / "home" / "lancedb" / f"{name}.lance"
    if not home.exists():
        corpus = work / name
        write_corpus(name, corpus)
        _, proc = localgpt(env, "ingest", "-C", name, str(corpus), "--json")
        summary = records(proc)[-1]
        print(f"ingest {name}: {summary['added']} documents, {summary['chunks']} chunks",
              flush=True)
    return work / "home" / "lancedb"


def open_collection(work: Path, name: str) -> Any:
    from localgpt_cli.rag.store import open_store

    return open_store(work / "home" / "lancedb").collection(name)


if __name__ == "__main__":
    which, where = sys.argv[1], Path(sys.argv[2])
    with served_model() as (url, _embedder):
        build(which, where, environment(where, url))
