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
    from collections.abc import Iterator

    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.types import ParsedDocument, Section

    Spans = Iterator[tuple[Section, int, int, int | None, int | None]]  # chunk.chunk_spans


@dataclass
class Rows:
    """A document's chunks as the columns of their rows (`store.rows.chunk_columns`),
    with what the ingest process needs to build their embedding inputs when it sends
    them: whether each has the title above it, and the longest input's length."""

    columns: dict[str, list[Any]] = field(default_factory=dict)
    titled: list[bool] = field(default_factory=list)
    longest: int = 0  # characters of the longest embedding input (no model prefix)

    @classmethod
    def of(cls, doc: ParsedDocument, document_id: str, spans: Spans, title: str | None) -> Rows:
        """The rows of `doc`'s chunks (`chunk.chunk_spans`), in `chunk_columns`' order,
        built without a `Chunk` per row, and their embedding inputs hashed (`embed_hash`,
        the title hashed once for the document)."""
        from localgpt_cli.rag.store.rows import chunk_id

        texts, pages, headings, line_starts, line_ends, confidences = [], [], [], [], [], []
        for section, start, end, line_start, line_end in spans:
            texts.append(section.text[start:end])
            pages.append(section.page)
            headings.append(section.heading)
            line_starts.append(line_start)
            line_ends.append(line_end)
            confidences.append(section.ocr_confidence)
        n = len(texts)
        flags, hashes, longest = _embed_inputs(title, texts)
        columns: dict[str, list[Any]] = {
            "chunk_id": [chunk_id(document_id, i) for i in range(n)],
            "document_id": [document_id] * n,
            "path": [doc.path] * n,
            "type": [doc.type] * n,
            "ordinal": list(range(n)),
            "text": texts,
            "page": pages,
            "heading": headings,
            "line_start": line_starts,
            "line_end": line_ends,
            "text_hash": hashes,
            "title": [title] * n,
            "ocr_confidence": confidences,
        }
        return cls(columns, flags, longest)

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


def _embed_inputs(title: str | None, texts: list[str]) -> tuple[list[bool], list[str], int]:
    """Whether each text gets the title above it (`titles.titled`), the hash of each
    embedding input (`titles.embed_body`, hashed as `rows.text_hash` does), and the
    longest input's length. The input itself is built only when it is sent."""
    import hashlib

    from localgpt_cli.rag.titles import TITLE_SEPARATOR, titled

    head = hashlib.sha256(f"{title}{TITLE_SEPARATOR}".encode()) if title else None
    extra = len(title) + len(TITLE_SEPARATOR) if title else 0
    flags, hashes, longest = [], [], 0
    for text in texts:
        flag = titled(title, text)
        if flag:
            assert head is not None
            h = head.copy()
            h.update(text.encode("utf-8"))
            longest = max(longest, extra + len(text))
        else:
            h = hashlib.sha256(text.encode("utf-8"))
            longest = max(longest, len(text))
        flags.append(flag)
        hashes.append(h.hexdigest())
    return flags, hashes, longest


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
    from localgpt_cli.rag.chunk import chunk_spans
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.titles import document_title

    start = time.perf_counter()
    try:
        if not readable:
            raise InvalidInput(f"{path}: cannot read")
        doc = parse_file(Path(path), max_bytes=opts.max_file_size, ocr=opts.ocr)
        spans = chunk_spans(
            doc,
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
    rows = Rows.of(doc, doc_id, spans, title)
    doc.sections = []  # the rows hold the text now
    return Parsed(doc, rows, title, seconds=time.perf_counter() - start)
