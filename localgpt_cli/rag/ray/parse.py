"""The Ray engine's first stage, run as Ray tasks: files read, parsed and cut into chunks.

A block of this stage holds whole files: one output row per file, its chunks inside it
(as JSON), so no later stage can split a document across blocks, and a lost block loses
whole documents, which then fail alone. The row says what became of the file (`outcome`:
ok, unchanged, failed, skipped) the way the plain engine's `ingest/document.py` decides
it, and carries each chunk's embedding input and its hash (the cache key)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from localgpt_cli.errors import InvalidInput

if TYPE_CHECKING:
    import pyarrow as pa

    from localgpt_cli.rag.ingest.options import IngestOptions

# The columns of a row between the stages; `chunks` and `vectors` are filled in by them.
DOC_COLUMNS = ("document_id", "info", "chunks", "vectors", "stats")


def parse_block(batch: pa.Table, opts: IngestOptions) -> pa.Table:
    """Every file of `batch` (rows of `items()`) parsed: one row per file."""
    rows = [_parse_one(item, opts) for item in batch.to_pylist()]
    return doc_table(rows)


def doc_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows in the one schema the stages pass on (`vectors` float32 bytes, `stats` JSON)."""
    import pyarrow as pa

    schema = pa.schema(
        [
            pa.field("document_id", pa.string()),
            pa.field("info", pa.string()),
            pa.field("chunks", pa.string()),
            pa.field("vectors", pa.binary()),
            pa.field("stats", pa.string()),
        ]
    )
    return pa.Table.from_pylist(
        [{k: row.get(k) for k in DOC_COLUMNS} for row in rows], schema=schema
    )


def _parse_one(item: dict[str, Any], opts: IngestOptions) -> dict[str, Any]:
    start = time.perf_counter()
    info: dict[str, Any] = {"path": item["path"], "outcome": "ok"}
    row: dict[str, Any] = {"document_id": item["document_id"]}
    try:
        parsed, chunks = _parse(item, opts)
    except InvalidInput as exc:
        info.update(outcome="skipped" if exc.code == "binary_file" else "failed")
        info.update(code=exc.code, message=exc.message)
    except Exception as exc:  # a parser bug on one odd file must not stop the run
        message = f"{item['path']}: {type(exc).__name__}: {exc}"
        info.update(outcome="failed", code="parse_error", message=message)
    else:
        info["type"] = parsed.type
        if not chunks:
            message = f"{item['path']}: no text (empty file); skipped"
            info.update(outcome="skipped", code="empty", message=message)
        else:
            row["chunks"] = _chunk_payload(item, opts, parsed, chunks, info)
    info["ms"] = round((time.perf_counter() - start) * 1000)
    row["info"] = orjson.dumps(info).decode()
    return row


def _parse(item: dict[str, Any], opts: IngestOptions) -> tuple[Any, list[Any]]:
    from localgpt_cli.rag.chunk import chunk_document
    from localgpt_cli.rag.parse import parse_file

    if not item["sha256"]:
        raise InvalidInput(f"{item['path']}: cannot read")
    parsed = parse_file(Path(item["path"]), max_bytes=opts.max_file_size, ocr=opts.ocr)
    chunks = chunk_document(
        parsed,
        item["document_id"],
        size=opts.chunk_size,
        overlap=opts.chunk_overlap,
        max_chunks=opts.max_chunks,
    )
    return parsed, chunks


def _chunk_payload(
    item: dict[str, Any], opts: IngestOptions, parsed: Any, chunks: list[Any], info: dict
) -> str | None:
    """The chunks' columns, titles and embedding inputs as JSON; None (and the outcome
    `unchanged`) when the rows stored for this path are already exactly these."""
    from localgpt_cli.rag.store import text_hash
    from localgpt_cli.rag.store.rows import chunk_columns
    from localgpt_cli.rag.titles import document_title, embed_body

    title = document_title(parsed)
    for chunk in chunks:
        chunk.title = title
    bodies = [embed_body(title, c.text) for c in chunks]
    hashes = [text_hash(body) for body in bodies]
    info["chunks"] = len(chunks)
    info["warnings"] = list(parsed.warnings)
    if item.get("stored") is not None and item["stored"] == hashes and not opts.force:
        info["outcome"] = "unchanged"
        return None
    columns = chunk_columns(chunks, hashes)
    return orjson.dumps({"columns": columns, "bodies": bodies}).decode()
