"""What an ingest run is asked to do, and what a document's rows depend on besides its bytes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localgpt_cli.rag.chunk import DEFAULT_MAX_CHUNKS, resolve_limits
from localgpt_cli.rag.parse.ocr import OcrSettings

DEFAULT_MAX_FILE_SIZE = 20_000_000
DEFAULT_BATCH_SIZE = 64
# Rows gathered before a commit: large enough that commits do not dominate a run over many
# small files, small enough that a few MB of text and vectors are all that wait in memory.
# Each commit costs LanceDB ~15 ms of CPU whatever its size (a file and a table version):
# on the 20 MB corpus 23 commits of 2000 rows took 0.65 s, 5 of 10,000 0.33 s. When chunks
# come faster than one commit a second (no embedding to wait for), 8000 rows a commit.
COMMIT_ROWS = 8000
# ...and at least this often (seconds), so a run killed while a slow CPU embeds thousands of
# chunks loses at most this much work; a commit costs ~30-60 ms, a few percent of it.
COMMIT_SECONDS = 1.0
# Names the way chunks are turned into embedding inputs (rag/titles.py); part of each
# manifest entry's options, so changing it makes the next run re-process every document.
EMBED_RECIPE = "titled"


@dataclass
class IngestOptions:
    """What `localgpt ingest` was asked to do."""

    paths: Sequence[str]
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    prune: bool = False
    force: bool = False
    ocr: OcrSettings = OcrSettings()  # scanned pages and image files (rag/parse/ocr.py)
    dry_run: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    max_chunks: int = DEFAULT_MAX_CHUNKS
    commit_rows: int = COMMIT_ROWS
    commit_seconds: float = COMMIT_SECONDS
    workers: int = 1  # processes that parse and chunk (pool.py); 1: this process alone
    concurrency: int = 1  # embedding requests in flight (rag/embedding.py)


def options_key(opts: IngestOptions, doc_type: str | None) -> str:
    """What a document's rows depend on besides its bytes: chunk limits and the embed
    input recipe (`titled`: the title above each chunk). A manifest entry written with
    another key is processed again, so collections made before titles re-embed once."""
    if doc_type is None:
        return ""
    size, overlap = resolve_limits(doc_type, opts.chunk_size, opts.chunk_overlap)
    read_by_ocr = opts.ocr.key() if doc_type in ("pdf", "image") else ""
    return f"{size}/{overlap}/{EMBED_RECIPE}{read_by_ocr}"


def path_options_key(opts: IngestOptions, path: str) -> str:
    """`options_key` of the file at `path`, its type told by its name (or first bytes)."""
    from localgpt_cli.rag.filetypes import detect_type

    kind = detect_type(Path(path))
    return options_key(opts, kind[0] if kind else None)
