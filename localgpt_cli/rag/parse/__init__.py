"""One file -> a ParsedDocument of Sections, whatever its format (one module per format here).

`parse_file` is the only entry point ingest needs: it checks the size limit, picks the
parser from the file name (`filetypes.detect_type`) and turns every way a file can be
unreadable into an `InvalidInput` that names the file and the reason, so one bad file
fails alone and the rest of an ingest run goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.decode import decode_text
from localgpt_cli.rag.filetypes import detect_type, is_binary, looks_binary
from localgpt_cli.rag.types import ParsedDocument, Section

if TYPE_CHECKING:
    from localgpt_cli.rag.parse.ocr import OcrSettings

__all__ = ["DEFAULT_MAX_BYTES", "detect_type", "is_binary", "parse_file"]

DEFAULT_MAX_BYTES = 20_000_000


def parse_file(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, ocr: OcrSettings | None = None
) -> ParsedDocument:
    """Parse one file into sections; raise InvalidInput if it cannot or must not be read.

    `ocr` says how scanned pages and image files are read (rag/parse/ocr.py); None reads
    text layers only and skips images, as ingest did before OCR. Error codes a caller may
    act on: `too_large`, `binary_file` (skip, not a failure), `no_text` (a PDF with
    nothing to extract), `encrypted`, `ocr_language` and `ocr_failed`, and
    `invalid_input` for corrupt or unreadable files.
    """
    path = Path(path)
    kind = detect_type(path)
    if kind is None:
        raise InvalidInput(f"{path}: binary file; skipped", code="binary_file")
    doc_type, language = kind
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if size > max_bytes:
        raise _too_large(path, f"{_megabytes(size, up=True)} MB > {_megabytes(max_bytes)} MB limit")
    if doc_type == "pdf":
        from localgpt_cli.rag.parse.pdf import parse_pdf

        return parse_pdf(path, ocr)
    if doc_type == "image":
        from localgpt_cli.rag.parse.image import parse_image

        return parse_image(path, ocr)
    if doc_type == "docx":
        from localgpt_cli.rag.parse.docx import parse_docx

        return parse_docx(path, max_bytes=max_bytes)

    data = _read_bytes(path, max_bytes, size)
    if looks_binary(data):
        raise InvalidInput(f"{path}: binary file; skipped", code="binary_file")
    if doc_type == "html":
        from localgpt_cli.rag.parse.html import parse_html

        return parse_html(path, data)
    text, warning = decode_text(data)
    del data
    warnings = [warning] if warning else []
    if doc_type == "markdown":
        from localgpt_cli.rag.parse.markdown import markdown_sections

        sections = markdown_sections(text)
    else:
        sections = [Section(text=text, line_start=1)] if text.strip() else []
    return ParsedDocument(
        path=str(path), type=doc_type, sections=sections, language=language, warnings=warnings
    )


def _read_bytes(path: Path, max_bytes: int, size: int) -> bytes:
    """The file's bytes, never more than the limit: `stat` said it fits (`size`), but a
    file can grow while it is read (a live log) or report a size it does not have (/proc).

    Read in pieces the size `stat` gave (then 64 KiB) rather than asking for the whole
    limit at once, which made every read allocate (and hand back) 20 MB for a 10 KB file."""
    want = max_bytes + 1
    try:
        with open(path, "rb", buffering=0) as fh:
            pieces: list[bytes] = []
            got, ask = 0, size + 1
            while got < want and (piece := fh.read(min(want - got, ask))):
                pieces.append(piece)
                got += len(piece)
                ask = 1 << 16
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise _too_large(path, f"over the {_megabytes(max_bytes)} MB limit when read")
    return data


def _too_large(path: Path, detail: str) -> InvalidInput:
    return InvalidInput(
        f"{path}: too large ({detail}; raise with --max-file-size)", code="too_large"
    )


def _megabytes(n: int, *, up: bool = False) -> str:
    """20_000_000 -> "20", 25_300_000 -> "25.3": decimal MB, as people say file sizes.

    A size over the limit rounds up, so 20_000_001 bytes reads "20.1 MB > 20 MB" rather
    than the puzzling "20 MB > 20 MB".
    """
    tenths = -(-n // 100_000) if up else round(n / 100_000)
    return f"{tenths / 10:.1f}".removesuffix(".0")
