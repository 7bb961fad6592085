"""An image file (PNG, JPEG, TIFF with its pages, WebP, BMP) -> the text OCR reads in it.

An image is a document only when OCR may run: with `--ocr never`, or without Tesseract
under `--ocr auto`, it is skipped as a binary file, as
before OCR existed, the skip saying what to install; `--ocr always` makes that a failure.
Each frame of a multi-page TIFF is a page, cited by its number. `picture_text` reads a
picture's bytes the same way for a model that cannot see it (read_file, `chat --ocr`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.parse import ocr
from localgpt_cli.rag.parse.scanned import low_confidence
from localgpt_cli.rag.types import ParsedDocument, Section

# Pillow's formats for the image extensions rag/filetypes.py gives the type "image".
FORMATS = ("PNG", "JPEG", "TIFF", "WEBP", "BMP")


def parse_image(path: Path, settings: ocr.OcrSettings | None) -> ParsedDocument:
    """OCR every frame of the image at `path`; InvalidInput to skip or fail it."""
    if settings is None or settings.mode == "never":
        raise InvalidInput(f"{path}: image file; skipped (OCR is off)", code="binary_file")
    why = ocr.missing()
    if why is not None:
        if settings.mode == "auto":
            raise InvalidInput(f"{path}: image file; skipped ({why})", code="binary_file")
        raise InvalidInput(f"{path}: image file not read ({why})", code="no_text")
    ocr.check_languages(settings, str(path))
    try:
        sections, warnings, failed = _frames(path, settings)
    except InvalidInput as exc:  # not an image after all: a file named .png by mistake, a
        if settings.mode == "always":  # truncated thumbnail; `auto` skips it, as before OCR
            raise
        raise InvalidInput(f"{exc.message}; skipped", code="binary_file") from exc
    if not sections:
        if failed:
            raise InvalidInput(f"{path}: {failed[0]}", code="ocr_failed")
        raise InvalidInput(f"{path}: no text found by OCR; skipped", code="empty")
    return ParsedDocument(path=str(path), type="image", sections=sections,
                          warnings=failed[:5] + warnings)  # fmt: skip


def picture_text(data: bytes, source: str, settings: ocr.OcrSettings) -> str:
    """The text OCR reads in the picture `data` (each frame of a multi-page TIFF under a
    page marker; empty when it holds none). InvalidInput: `ocr_unavailable` without
    Tesseract (naming the package to install), `ocr_language`, `ocr_failed` when every
    frame failed, and a picture Pillow cannot read."""
    why = ocr.missing()
    if why is not None:
        raise InvalidInput(f"{source}: OCR cannot read its text here ({why})",
                           code="ocr_unavailable")
    ocr.check_languages(settings, source)
    sections, _, failed = _frames(io.BytesIO(data), settings, source)
    if not sections and failed:
        raise InvalidInput(f"{source}: {failed[0]}", code="ocr_failed")
    if len(sections) == 1 and sections[0].page == 1:
        return sections[0].text
    return "\n\n".join(f"--- page {s.page} ---\n{s.text}" for s in sections)


def _frames(
    path: Path | BinaryIO, settings: ocr.OcrSettings, where: object = None
) -> tuple[list[Section], list[str], list[str]]:
    """Sections of the frames with text, low-confidence warnings, failed frames (`where`:
    what an error calls the picture, `path` by default)."""
    from PIL import Image, ImageSequence, UnidentifiedImageError

    sections: list[Section] = []
    warnings: list[str] = []
    failed: list[str] = []
    try:
        with Image.open(path, formats=FORMATS) as image:
            dpi = _dpi(image.info.get("dpi"), settings.dpi)
            for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
                try:
                    page = ocr.read_page(frame, settings, dpi=dpi)
                except ocr.OcrPageError as exc:
                    failed.append(f"page {number}: OCR failed ({exc})")
                    continue
                if page.text.strip():
                    sections.append(Section(text=page.text, page=number,
                                            ocr_confidence=page.confidence))  # fmt: skip
                    if page.confidence < ocr.CONFIDENCE_FLOOR:
                        warnings.append(low_confidence(number, page.confidence))
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise InvalidInput(f"{where or path}: unreadable image ({exc})") from exc
    return sections, warnings, failed


def _dpi(declared: object, default: int) -> int:
    """The resolution the file declares (Tesseract sizes its text by it), else `default`:
    a 150 dpi scan read as 300 dpi lost a page of text. TIFF gives a rational, not a float."""
    try:
        value = float(declared[0]) if isinstance(declared, tuple) else 0.0
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        return default
    return round(value) if 70 <= value <= 2400 else default
