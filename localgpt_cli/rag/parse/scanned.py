"""The pages of a PDF that OCR reads: which ones (`--ocr auto|always`), read one by one.

A page is read by OCR when `--ocr always`, or (`auto`) when its text layer is unusable
(rag/parse/textlayer.py): almost empty on a page that draws a picture, or garbled. Each
page is drawn by PDFium and read by its own Tesseract process (rag/parse/ocr.py), so a
page that fails or hangs fails alone: the page's text layer (if any) is kept instead and
a warning names the page. Without Tesseract the pages are left as they are, and the
caller's `no_text` error or a warning names what to install.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from localgpt_cli.pdf_text import PdfPageError, PdfPages
from localgpt_cli.rag.parse import ocr
from localgpt_cli.rag.parse.textlayer import is_garbled, is_sparse
from localgpt_cli.rag.types import Section


@dataclass
class OcrOutcome:
    """What OCR did to a PDF: the sections it read (page -> section), warnings, and why
    the pages that needed it were not read (`unread`: what to install)."""

    sections: dict[int, Section] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unread: str | None = None


def wanted(pdf: PdfPages, texts: dict[int, str], settings: ocr.OcrSettings) -> list[int]:
    """The pages (1-based) OCR must read, by the settings' mode."""
    if settings.mode == "never":
        return []
    every = range(1, pdf.count + 1)
    if settings.mode == "always":
        return list(every)
    return [number for number in every if unusable(pdf, number, texts.get(number, ""))]


def unusable(pdf: PdfPages, number: int, text: str) -> bool:
    """Whether page `number`, whose text layer is `text`, must be read by OCR: almost no
    text on a page that draws a picture, or a text layer that reads as noise (`chat
    --pages` asks this of the pages it sends a model that cannot see)."""
    if is_sparse(text):
        return _draws_picture(pdf, number)
    return is_garbled(text)


def read_pages(
    pdf: PdfPages, where: str, pages: list[int], settings: ocr.OcrSettings
) -> OcrOutcome:
    """OCR `pages` of `pdf` one by one; InvalidInput (`ocr_language`) if a language pack
    is missing, before any page is read."""
    outcome = OcrOutcome()
    if not pages:
        return outcome
    why = ocr.missing()
    if why is not None:
        outcome.unread = why
        return outcome
    ocr.check_languages(settings, where)
    failed: list[str] = []
    for number in pages:
        try:
            page = ocr.read_page(pdf.render(number, settings.dpi, grey=True), settings)
        except (ocr.OcrPageError, PdfPageError) as exc:
            failed.append(f"page {number}: OCR failed ({exc})")
            continue
        if not page.text.strip():
            continue
        outcome.sections[number] = Section(
            text=page.text, page=number, ocr_confidence=page.confidence
        )
        if page.confidence < ocr.CONFIDENCE_FLOOR:
            outcome.warnings.append(low_confidence(number, page.confidence))
    outcome.warnings = failed[:5] + outcome.warnings
    if len(failed) > 5:
        outcome.warnings.append(f"... and {len(failed) - 5} more pages OCR failed on")
    return outcome


def low_confidence(number: int, confidence: float) -> str:
    """The warning of a page kept although Tesseract was unsure of its words."""
    return (
        f"page {number}: OCR confidence {confidence:g} < {ocr.CONFIDENCE_FLOOR:g}; "
        "kept (check the scan, or its language: [ingest] ocr_languages)"
    )


def _draws_picture(pdf: PdfPages, number: int) -> bool:
    try:
        return pdf.has_image(number)
    except Exception:  # PDFium's errors on a broken page: the page is not read, as before
        return False
