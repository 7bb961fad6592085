"""The values passed between parse, chunk, embed, store and retrieve.

Kept in one small module so that each stage can be written and tested alone: parse
yields `Section`s, chunk turns them into `Chunk`s, the store keeps `Chunk`s with their
vectors, retrieval returns `Hit`s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A cross-encoder's relevance (0..1) of each passage to the question, in the passages'
# order: llm/rerank.py bound to a profile's model by the command (rag/judge.py uses it).
Judge = Callable[[str, Sequence[str]], list[float]]


@dataclass
class Section:
    """A piece of a parsed document that chunking must not merge across.

    A PDF page, a Markdown section under one heading path, or a whole code/text file.
    `line_start` is the 1-based line of the section's first character in the source, so
    chunk line ranges can be computed for code and text.
    """

    text: str
    page: int | None = None
    heading: str | None = None
    line_start: int | None = None
    ocr_confidence: float | None = None  # read by OCR: its words' mean confidence (0-100)


@dataclass
class ParsedDocument:
    """What a parser returns for one file."""

    path: str
    type: str  # pdf | markdown | text | code | html | docx | image
    sections: list[Section]
    language: str | None = None  # for code: py, js, rs, ...
    warnings: list[str] = field(default_factory=list)
    title: str | None = None  # the title the file's metadata declares (PDF), if any


@dataclass
class Chunk:
    """One retrievable passage, with where it came from."""

    document_id: str
    path: str
    type: str
    ordinal: int
    text: str
    page: int | None = None
    heading: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    title: str | None = None  # the document's title, embedded with the text (rag/titles.py)
    ocr_confidence: float | None = None  # its page was read by OCR (Section.ocr_confidence)


@dataclass
class Hit:
    """One search result: a chunk, its rank and score, and the mode that found it."""

    rank: int
    score: float
    document_id: str
    path: str
    chunk: int
    text: str
    type: str | None = None
    page: int | None = None
    heading: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    ocr_confidence: float | None = None  # read by OCR, with this mean confidence (0-100)
    extra: dict[str, Any] = field(default_factory=dict)


def citation(path: str, chunk: int, page: int | None = None) -> str:
    """`[Source: notes/vpn.md, chunk 3, page 2]`: the label an excerpt carries in the model's
    context. The model cites it and the user checks it against the `sources` packet, so
    every place that shows the model an excerpt labels it through this one function."""
    label = f"[Source: {path}, chunk {chunk}"
    if page is not None:
        label += f", page {page}"
    return label + "]"
