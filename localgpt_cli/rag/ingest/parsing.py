"""One file parsed and cut into chunks, as `document.read_document` takes it: done in this
process, or in a worker process of `pool.py`, which imports this module and the parsers
alone (not LanceDB: a worker holds only what parsing needs)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import InvalidInput

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.types import Chunk, ParsedDocument


@dataclass
class Parsed:
    """What parsing and cutting one file gave: picklable, so that a worker process
    (`pool.py`) can hand it back. `code` and `message` say why it could not be read."""

    doc: ParsedDocument | None  # its sections dropped: the chunks hold the text
    chunks: list[Chunk]
    title: str | None = None
    code: str | None = None
    message: str | None = None
    seconds: float = 0.0  # parsing and cutting it took

    @classmethod
    def failed(cls, code: str, message: str, seconds: float = 0.0) -> Parsed:
        return cls(None, [], None, code, message, seconds)


def parse_chunk(opts: IngestOptions, path: str, readable: bool, doc_id: str) -> Parsed:
    """Parse and cut the file at `path` (`readable`: its sha256 could be taken); never
    raises for a bad file, whose `Parsed` says why."""
    from localgpt_cli.rag.chunk import chunk_document
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.titles import document_title

    start = time.perf_counter()
    try:
        if not readable:
            raise InvalidInput(f"{path}: cannot read")
        doc = parse_file(Path(path), max_bytes=opts.max_file_size, ocr=opts.ocr)
        chunks = chunk_document(
            doc,
            doc_id,
            size=opts.chunk_size,
            overlap=opts.chunk_overlap,
            max_chunks=opts.max_chunks,
        )
    except InvalidInput as exc:
        return Parsed.failed(exc.code, exc.message, time.perf_counter() - start)
    except Exception as exc:  # a parser bug on one odd file must not stop the run
        message = f"{path}: {type(exc).__name__}: {exc}"
        return Parsed.failed("parse_error", message, time.perf_counter() - start)
    title = document_title(doc)
    doc.sections = []  # the chunks hold the text now
    for chunk in chunks:
        chunk.title = title
    return Parsed(doc, chunks, title, seconds=time.perf_counter() - start)
