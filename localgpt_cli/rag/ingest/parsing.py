"""One file parsed and cut into chunks, as `document.read_document` takes it: done in this
process, or in a worker process of `pool.py`, which imports this module and the parsers
alone (not LanceDB: a worker holds only what parsing needs).

Everything about a chunk that depends on the file alone is done here, so that with
workers it is done on every core and the ingest process only takes the results: the
title, each chunk's embedding input hash (its cache key), and the columns of its rows.
Columns (one list per row field), not `Chunk` objects: a list of strings is pickled and
unpickled many times faster than as many small objects, and they are what the store
writes (`store.Writes.write_rows`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.types import Chunk, ParsedDocument


@dataclass
class Rows:
    """A document's chunks as the columns of their rows (`store.rows.chunk_columns`),
    with what the ingest process needs to build their embedding inputs when it sends
    them: whether each has the title above it, and the longest input's length."""

    columns: dict[str, list[Any]] = field(default_factory=dict)
    titled: list[bool] = field(default_factory=list)
    longest: int = 0  # characters of the longest embedding input (no model prefix)

    @classmethod
    def of(cls, chunks: list[Chunk], title: str | None) -> Rows:
        from localgpt_cli.rag.store.rows import chunk_columns, text_hash
        from localgpt_cli.rag.titles import titled, with_title

        flags = [titled(title, c.text) for c in chunks]  # `titles.embed_body`, in two steps
        bodies = [
            with_title(title, c.text) if flag else c.text
            for c, flag in zip(chunks, flags, strict=True)
        ]
        return cls(
            chunk_columns(chunks, [text_hash(body) for body in bodies]),
            flags,
            max((len(body) for body in bodies), default=0),
        )

    def __len__(self) -> int:
        return len(self.columns.get("chunk_id", ()))

    @property
    def hashes(self) -> list[str]:
        """Each chunk's embedding-cache key (its `text_hash` column)."""
        return self.columns.get("text_hash", [])

    def body(self, index: int, title: str | None) -> str:
        """The embedding input of chunk `index` (`titles.embed_body`), built when sent."""
        from localgpt_cli.rag.titles import with_title

        text = self.columns["text"][index]
        return with_title(title, text) if self.titled[index] else text


@dataclass
class Parsed:
    """What parsing and cutting one file gave: picklable, so that a worker process
    (`pool.py`) can hand it back. `code` and `message` say why it could not be read."""

    doc: ParsedDocument | None  # its sections dropped: the rows hold the text
    rows: Rows
    title: str | None = None
    code: str | None = None
    message: str | None = None
    seconds: float = 0.0  # parsing and cutting it took

    @classmethod
    def failed(cls, code: str, message: str, seconds: float = 0.0) -> Parsed:
        return cls(None, Rows(), None, code, message, seconds)


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
    doc.sections = []  # the rows hold the text now
    for chunk in chunks:
        chunk.title = title
    return Parsed(doc, Rows.of(chunks, title), title, seconds=time.perf_counter() - start)
