"""PDF -> one Section per page, page numbers kept for citations: PDFium, pypdf as fallback.

Pages without a usable text layer (scans) are read by OCR when asked (`ocr`, see
rag/parse/scanned.py); pypdf's fallback reads text layers only.

PDFium (`localgpt_cli/pdf_text.py`) reads the text, about ten times faster than pypdf with
the same characters (README, Performance). pypdf stays for the files PDFium refuses: the
document is then read with pypdf and says so in its warnings; when neither reads it, the
error is pypdf's, the one-line `corrupt PDF (...)` of before. PDFium repairs a damaged
cross-reference table silently, so that damage is checked here (`_xref_damage`).

pypdf is imported here, not at module top: it is heavy and only ingest needs it.
It is also chatty about damaged files (logger warnings, `warnings.warn`); those are
captured rather than printed, because a cron ingest must stay quiet, and the first of
them is kept as a document warning (or as the reason, when the file cannot be read).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from localgpt_cli.errors import InvalidInput
from localgpt_cli.pdf_text import PdfPageError, PdfPages, PdfPassword, PdfRefused, open_pdf
from localgpt_cli.rag.types import ParsedDocument, Section

if TYPE_CHECKING:
    from localgpt_cli.rag.parse.ocr import OcrSettings


class _Collector(logging.Handler):
    """Keeps pypdf's log messages instead of letting them reach stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _quiet_pypdf() -> Iterator[_Collector]:
    logger = logging.getLogger("pypdf")
    collector = _Collector()
    saved = logger.propagate
    logger.addHandler(collector)
    logger.propagate = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield collector
    finally:
        logger.removeHandler(collector)
        logger.propagate = saved


def parse_pdf(path: Path, ocr: OcrSettings | None = None) -> ParsedDocument:
    """Extract text page by page, scanned pages by OCR when `ocr` says so; raise
    InvalidInput for encrypted, corrupt or (without OCR) scanned PDFs."""
    unread: str | None = None
    try:
        with open_pdf(path) as pdf:
            texts, failed_pages = _pdfium_pages(pdf)
            sections, notes, unread = _with_ocr(pdf, path, texts, ocr)
            page_count, title = pdf.count, pdf.title()
        damage = _xref_damage(path)
        notes += [f"damaged PDF, read with repairs ({damage})"] if damage else []
    except PdfPassword as exc:
        raise _encrypted(path) from exc
    except PdfRefused as refused:
        with _quiet_pypdf() as log, open(path, "rb") as fh:
            sections, failed_pages, page_count, title = _extract(path, fh, log)
        notes = [f"PDFium could not open it ({refused}); read with pypdf"]
        if log.messages:
            notes.append(f"damaged PDF, read with repairs ({log.messages[0]})")
    return _document(path, sections, failed_pages, page_count, title, notes, unread)


def _pdfium_pages(pdf: PdfPages) -> tuple[dict[int, str], list[tuple[int, str]]]:
    """The text layer of each page that reads, and the pages whose text failed."""
    texts: dict[int, str] = {}
    failed: list[tuple[int, str]] = []
    for number in range(1, pdf.count + 1):
        try:
            texts[number] = pdf.text(number)
        except PdfPageError as exc:  # one broken page must not lose the others
            failed.append((number, f"PdfiumError: {exc}"))
    return texts, failed


def _with_ocr(
    pdf: PdfPages, path: Path, texts: dict[int, str], settings: OcrSettings | None
) -> tuple[list[Section], list[str], str | None]:
    """The sections in page order (OCR's where it read a page, else the text layer's),
    warnings, and what to install when pages that needed OCR could not have it."""
    read: dict[int, Section] = {}
    notes: list[str] = []
    unread: str | None = None
    if settings is not None:
        from localgpt_cli.rag.parse import scanned

        outcome = scanned.read_pages(pdf, str(path), scanned.wanted(pdf, texts, settings), settings)
        read, notes, unread = outcome.sections, outcome.warnings, outcome.unread
    sections = [
        read.get(number) or Section(text=text, page=number)
        for number, text in sorted({**texts, **{n: "" for n in read}}.items())
        if number in read or text.strip()
    ]
    return sections, notes, unread


def _document(
    path: Path,
    sections: list[Section],
    failed_pages: list[tuple[int, str]],
    page_count: int,
    title: str | None,
    notes: list[str],
    unread: str | None = None,
) -> ParsedDocument:
    """The parsed document, or the one-line error of a PDF with no text at all (`unread`:
    why OCR could not read its pages, what to install)."""
    if not sections:
        if failed_pages:
            raise InvalidInput(f"{path}: corrupt PDF (no page could be read: {failed_pages[0]})")
        if notes and notes[0].startswith("page "):  # every page OCR read failed
            raise InvalidInput(f"{path}: {notes[0]}", code="ocr_failed")
        why = f"scanned; {unread}" if unread else (
            "probably scanned; OCR it first, e.g. with ocrmypdf"
        )
        raise InvalidInput(
            f"{path}: no extractable text in {page_count} page(s) ({why})", code="no_text"
        )
    if unread:
        notes.append(f"scanned pages not read ({unread})")
    failed = [f"page {n}: text not extracted ({why})" for n, why in failed_pages[:5]]
    if len(failed_pages) > 5:
        failed.append(f"... and {len(failed_pages) - 5} more pages not extracted")
    return ParsedDocument(
        path=str(path), type="pdf", sections=sections, warnings=failed + notes, title=title
    )


def _encrypted(path: Path) -> InvalidInput:
    return InvalidInput(
        f"{path}: encrypted PDF (needs a password); decrypt it first, e.g. with qpdf --decrypt",
        code="encrypted",
    )


_STARTXREF = re.compile(rb"startxref\s+(\d+)")
_XREF_START = re.compile(rb"\s*(?:xref|\d+\s+\d+\s+obj)")


def _xref_damage(path: Path) -> str | None:
    """Why the cross-reference table is damaged (PDFium rebuilds it without a word), or
    None: the last `startxref` must point at an `xref` table or an xref-stream object."""
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - 2048))
        found = list(_STARTXREF.finditer(fh.read()))
        if not found:
            return "no startxref near the end of the file"
        offset = int(found[-1].group(1))
        fh.seek(offset)
        if offset >= size or not _XREF_START.match(fh.read(64)):
            return f"startxref points to byte {offset}, where no cross-reference section starts"
    return None


def _extract(
    path: Path, fh: BinaryIO, log: _Collector
) -> tuple[list[Section], list[tuple[int, str]], int, str | None]:
    """Sections of the pages with text, pages whose extraction failed, the page count and
    the metadata title (rag/titles.py judges whether it is one)."""
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = PdfReader(fh)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise _encrypted(path)
        pages = reader.pages
        page_count = len(pages)
    except InvalidInput:
        raise
    except FileNotDecryptedError as exc:
        raise InvalidInput(f"{path}: encrypted PDF ({exc})", code="encrypted") from exc
    except DependencyError as exc:  # AES without the optional `cryptography` package
        raise InvalidInput(f"{path}: encrypted PDF ({exc})", code="encrypted") from exc
    except Exception as exc:  # pypdf raises anything (KeyError, ValueError...) on bad input
        raise InvalidInput(f"{path}: corrupt PDF ({_reason(exc, log)})") from exc

    sections: list[Section] = []
    failed: list[tuple[int, str]] = []
    for number in range(1, page_count + 1):
        try:
            text = pages[number - 1].extract_text() or ""
        except Exception as exc:  # one broken page must not lose the others
            failed.append((number, _reason(exc, log)))
            continue
        if text.strip():
            sections.append(Section(text=text, page=number))
    return sections, failed, page_count, _metadata_title(reader)


def _metadata_title(reader: Any) -> str | None:
    """The document-information title; None when absent or unreadable (a damaged info
    dictionary must not fail a PDF whose pages read)."""
    try:
        title = reader.metadata.title if reader.metadata is not None else None
    except Exception:  # pypdf raises anything on a broken info dictionary
        return None
    return str(title) if title else None


def _reason(exc: BaseException, log: _Collector) -> str:
    """The exception's message, or pypdf's last complaint when the message is empty."""
    message = str(exc).strip() or (log.messages[-1] if log.messages else "")
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
