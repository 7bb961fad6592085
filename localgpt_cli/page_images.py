"""PDF pages as pictures (`chat -f scan.pdf --pages 2-3` on a vision model), and the page
ranges `--pages` takes.

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

from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.images import Picture, fitted
from localgpt_cli.pdf_text import PdfPageError, PdfPages, PdfPassword, PdfRefused, open_pdf

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


def page_texts(path: Path, pages: list[int]) -> str:
    """The text of those pages (what a model without vision gets), each under a marker."""
    check_pages(path, pages)
    parts = []
    with _opened(path) as pdf:
        for number in pages:
            try:
                text = pdf.text(number)
            except PdfPageError as exc:
                raise InvalidInput(f"{path} page {number} cannot be read ({exc}).") from exc
            parts.append(f"--- page {number} ---\n{text}")
    return "\n\n".join(parts)


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
