"""PDF -> one Section per page with pypdf, page numbers kept for citations.

pypdf is imported here, not at module top: it is heavy and only ingest needs it.
It is also chatty about damaged files (logger warnings, `warnings.warn`); those are
captured rather than printed, because a cron ingest must stay quiet, and the first of
them is kept as a document warning (or as the reason, when the file cannot be read).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.types import ParsedDocument, Section


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


def parse_pdf(path: Path) -> ParsedDocument:
    """Extract text page by page; raise InvalidInput for encrypted, corrupt or scanned PDFs."""
    with _quiet_pypdf() as log, open(path, "rb") as fh:
        sections, failed_pages, page_count, title = _extract(path, fh, log)
    if not sections:
        if failed_pages:
            raise InvalidInput(f"{path}: corrupt PDF (no page could be read: {failed_pages[0]})")
        raise InvalidInput(
            f"{path}: no extractable text in {page_count} page(s) (probably scanned;"
            " OCR it first, e.g. with ocrmypdf)",
            code="no_text",
        )
    notes = [f"page {n}: text not extracted ({why})" for n, why in failed_pages[:5]]
    if len(failed_pages) > 5:
        notes.append(f"... and {len(failed_pages) - 5} more pages not extracted")
    if log.messages:
        notes.append(f"damaged PDF, read with repairs ({log.messages[0]})")
    return ParsedDocument(
        path=str(path), type="pdf", sections=sections, warnings=notes, title=title
    )


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
            raise InvalidInput(
                f"{path}: encrypted PDF (needs a password); decrypt it first, e.g. with"
                " qpdf --decrypt",
                code="encrypted",
            )
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
