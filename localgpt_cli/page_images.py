"""PDF pages as pictures (`chat -f scan.pdf --pages 2-3` on a vision model) or as text
(on another: a scanned page read by OCR), and the page ranges `--pages` takes.

PDFium (pypdfium2, already what reads PDF text) renders each page through
pdf_text.PdfPages.render, as for OCR; 150 dpi puts an A4 page at 1240x1754 pixels, under
images.MAX_SIDE, so a page is sent as rendered, small print still legible. Imported only
when a page is rendered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.images import Picture, fitted
from localgpt_cli.pdf_text import PdfPageError, PdfPages, PdfPassword, PdfRefused, open_pdf

if TYPE_CHECKING:
    from localgpt_cli.rag.parse.ocr import OcrSettings

DPI = 150
MAX_PAGES = 50  # pages one question may carry: each is a picture of ~1-3 MB for a vision model
_RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_pages(text: str) -> list[int]:
    """`2-3,5` -> [2, 3, 5] (1-based, in the order given, each page once); UsageError
    for anything else."""
    pages: dict[int, None] = {}  # ordered, each page once
    for part in text.split(","):
        found = _RANGE.fullmatch(part)
        first, last = (int(found.group(1)), int(found.group(2) or found.group(1))) \
            if found else (0, 0)
        if first < 1 or last < first:
            raise UsageError(f"--pages {text!r}: give page numbers from 1, like 2 or 2-3,5.")
        if last - first >= MAX_PAGES or len(pages) + last - first >= MAX_PAGES:
            raise UsageError(f"--pages {text!r}: at most {MAX_PAGES} pages at once.")
        pages.update(dict.fromkeys(range(first, last + 1)))
    return list(pages)


def page_count(path: Path) -> int:
    """How many pages the PDF has (InvalidInput when it cannot be opened)."""
    with _opened(path) as pdf:
        return pdf.count


def check_pages(path: Path, pages: list[int]) -> None:
    """InvalidInput (exit 6) for a page the PDF does not have."""
    count = page_count(path)
    missing = [n for n in pages if n > count]
    if missing:
        raise InvalidInput(f"{path} has {count} page(s); page {missing[0]} is not in it; "
                           "nothing was sent.", hint=f"Choose pages 1-{count} with --pages.")


def page_pictures(path: Path, pages: list[int], dpi: int = DPI) -> list[Picture]:
    """Each page rendered at `dpi` and encoded as PNG."""
    check_pages(path, pages)
    out = []
    with _opened(path) as pdf:
        for number in pages:
            try:
                image = pdf.render(number, dpi)
            except PdfPageError as exc:
                raise InvalidInput(f"{path} page {number} cannot be rendered ({exc}); "
                                   "nothing was sent.") from exc
            out.append(fitted(image, f"{path} page {number}", "image/png"))
    return out


def page_texts(
    path: Path, pages: list[int], ocr: OcrSettings | None = None
) -> tuple[str, list[str]]:
    """The text of those pages (what a model without vision gets), each under a marker,
    and warnings. With `ocr`, a page without a usable text layer (a scan) is read by
    Tesseract, as ingest reads it; without Tesseract that is one line naming the package
    (InvalidInput `ocr_unavailable`), not a scan sent as an empty page."""
    check_pages(path, pages)
    with _opened(path) as pdf:
        texts = {}
        for number in pages:
            try:
                texts[number] = pdf.text(number)
            except PdfPageError as exc:
                raise InvalidInput(f"{path} page {number} cannot be read ({exc}).") from exc
        read, warnings = _read_scans(pdf, path, texts, ocr) if ocr else ({}, [])
    parts = [f"--- page {n} ---\n{read.get(n, texts[n])}" for n in pages]
    return "\n\n".join(parts), warnings


def _read_scans(
    pdf: PdfPages, path: Path, texts: dict[int, str], ocr: OcrSettings
) -> tuple[dict[int, str], list[str]]:
    """The pages of `texts` whose text layer is unusable, read by OCR (rag/parse/scanned.py:
    a page Tesseract fails on keeps its text layer, with a warning)."""
    from localgpt_cli.rag.parse import scanned

    scans = [n for n, text in texts.items() if scanned.unusable(pdf, n, text)]
    outcome = scanned.read_pages(pdf, str(path), scans, ocr)
    if outcome.unread is not None:
        which = f"page {scans[0]} has" if len(scans) == 1 else \
            f"pages {', '.join(map(str, scans))} have"
        raise InvalidInput(f"{path} {which} no usable text layer to send a model that "
                           f"cannot see, and OCR cannot read it here ({outcome.unread}); "
                           "nothing was sent.", code="ocr_unavailable")
    return {n: s.text for n, s in outcome.sections.items()}, outcome.warnings


@contextmanager
def _opened(path: Path) -> Iterator[PdfPages]:
    """open_pdf with its failures as one-line InvalidInput errors."""
    try:
        with open_pdf(path) as pdf:
            yield pdf
    except PdfPassword as exc:
        raise InvalidInput(f"{path} is encrypted; nothing was sent.") from exc
    except PdfRefused as exc:
        raise InvalidInput(f"{path} is not a PDF PDFium can read ({exc}); "
                           "nothing was sent.") from exc
