"""PDF page text through PDFium (pypdfium2), for ingest and for the read_file tool; and
pages drawn as images, for OCR (rag/parse/scanned.py) and `chat --pages` (page_images.py).

Why PDFium: Chrome's PDF engine extracts the same text as pypdf about ten times faster
(README, Performance: `python -m tests.bench.pdf`), which is most of an archive ingest.
pypdfium2 is imported inside `open_pdf`, never at start-up (`localgpt --help` must stay
light). PDFium says nothing about a file it repairs and refuses some that pypdf reads, so
callers keep pypdf for those: `PdfRefused` is their cue. PDFium is not thread-safe: one
thread of a process reads PDFs at a time (ingest parses in one; a pool must use processes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

# PDFium marks a word hyphenated across a line end with U+FFFE and may end a line with a
# bare CR; the text is stored joined ("manipulation") with "\n" line ends, as pypdf gives.
_SOFT_HYPHEN = "\ufffe"
_LINE_ENDS = re.compile(r"\r\n?")
_ERR_PASSWORD = 4  # FPDF_ERR_PASSWORD: the document needs a (user) password


class PdfPassword(Exception):
    """The PDF opens only with a password."""


class PdfRefused(Exception):
    """PDFium cannot open the file (the message is PDFium's reason)."""


class PdfPageError(Exception):
    """One page's text could not be read (the others may be)."""


class PdfPages:
    """An open PDF: its page count, each page's text and its metadata title."""

    def __init__(self, document: Any) -> None:
        self._doc = document
        self.count: int = len(document)

    def text(self, number: int) -> str:
        """Text of page `number` (1-based), line ends "\\n"; PdfPageError when unreadable."""
        from pypdfium2 import PdfiumError

        try:
            page = self._doc[number - 1]
            try:
                textpage = page.get_textpage()
                try:
                    raw = textpage.get_text_range()
                finally:
                    textpage.close()
            finally:
                page.close()
        except PdfiumError as exc:
            raise PdfPageError(str(exc)) from exc
        return _LINE_ENDS.sub("\n", raw.replace(_SOFT_HYPHEN, ""))

    def has_image(self, number: int) -> bool:
        """Whether page `number` draws a picture (a scan is one): the pages worth OCR."""
        import pypdfium2.raw as pdfium_c

        page = self._doc[number - 1]
        try:
            return any(True for _ in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,)))
        finally:
            page.close()

    def render(self, number: int, dpi: int, *, grey: bool = False) -> Any:
        """Page `number` drawn at `dpi` as a PIL image (needs Pillow), in colour or grey:
        what `chat --pages` sends a vision model (page_images.py) and what OCR reads
        (rag/parse/scanned.py); PdfPageError when it cannot be drawn."""
        from pypdfium2 import PdfiumError

        try:
            page = self._doc[number - 1]
            try:
                return page.render(scale=dpi / 72, grayscale=grey).to_pil()
            finally:
                page.close()
        except PdfiumError as exc:
            raise PdfPageError(str(exc)) from exc

    def title(self) -> str | None:
        """The document-information title; None when absent or unreadable."""
        try:
            title = self._doc.get_metadata_value("Title")
        except Exception:  # a damaged info dictionary must not fail a PDF whose pages read
            return None
        return title.strip() or None


@contextmanager
def open_pdf(source: Path | BinaryIO) -> Iterator[PdfPages]:
    """Open a PDF file (by path, or an open binary file) with PDFium, without a password.

    Raises PdfPassword when it needs one and PdfRefused when PDFium cannot read it.
    """
    from pypdfium2 import PdfDocument, PdfiumError

    try:
        document = PdfDocument(str(source) if isinstance(source, Path) else source)
    except PdfiumError as exc:
        if getattr(exc, "err_code", None) == _ERR_PASSWORD:
            raise PdfPassword(str(exc)) from exc
        raise PdfRefused(_pdfium_reason(exc)) from exc
    try:
        yield PdfPages(document)
    finally:
        document.close()


def _pdfium_reason(exc: Exception) -> str:
    """PDFium's own words: 'Data format error' from 'Failed to load document (PDFium: …).'"""
    found = re.search(r"PDFium: ([^)]*)", str(exc))
    return found.group(1).rstrip(".") if found else str(exc)
