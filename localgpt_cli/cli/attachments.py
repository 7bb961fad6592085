"""The pictures a `chat` question carries: `--image FILE` (`-`: stdin), an image piped in,
and `-f FILE.pdf --pages N-M` on a model that can see; for a model that cannot, the
pages' text (a scanned page read by OCR) and, with `--ocr`, the pictures' OCR text.

Everything is read and checked (images.py) before a model is asked or anything stored:
a file that is not a picture, too large or damaged is one line and exit 6, and a model
without the `vision` capability is one line and exit 2, naming how to find one that has
it (or `--ocr`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from localgpt_cli.errors import InvalidInput, UsageError

if TYPE_CHECKING:
    from localgpt_cli.cli.app import App
    from localgpt_cli.cli.chat_flags import ChatFlags
    from localgpt_cli.images import Picture
    from localgpt_cli.kernel.grounding import ContextFile

# What the refusal tells to run: the installed models whose capabilities include vision.
FIND_VISION = ("localgpt models --json | jq -r 'select(.capabilities | index(\"vision\"))"
               " | .name'")


def image_files(flags: ChatFlags) -> list[Picture]:
    """Each --image, read and checked; `-` reads stdin (once)."""
    from localgpt_cli.images import picture

    if flags.images.count("-") > 1:
        raise UsageError("--image - reads stdin once; give it once.")
    pictures = []
    for name in flags.images:
        if name == "-":
            pictures.append(picture(_read_all(sys.stdin.buffer, b""), "stdin"))
            continue
        try:
            with Path(name).open("rb") as fh:
                data = _read_all(fh, b"")
        except OSError as exc:
            raise InvalidInput(f"cannot read {name}: {exc.strerror}; nothing was sent.") from exc
        pictures.append(picture(data, name))
    return pictures


def piped_picture(head: bytes, stream: BinaryIO) -> Picture:
    """Piped stdin whose first bytes are a picture's: the picture, not text."""
    from localgpt_cli.images import picture

    return picture(_read_all(stream, head), "stdin")


def _read_all(stream: BinaryIO, head: bytes) -> bytes:
    """At most one byte past the size limit (`cat /dev/zero |` is refused, not read
    forever): images.picture says the rest is too large."""
    from localgpt_cli.images import MAX_FILE_BYTES

    return head + stream.read(MAX_FILE_BYTES + 1 - len(head))


def is_pdf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(5) == b"%PDF-"
    except OSError:
        return path.lower().endswith(".pdf")


def attached(
    app: App, flags: ChatFlags, model: str, pictures: list[Picture]
) -> tuple[list[Picture], list[ContextFile]]:
    """What the question carries besides its text: `pictures` (--image, piped) and the
    --pages of the -f PDFs, as pictures for a model that can see; for one that cannot,
    the pages' text, and with --ocr the pictures' text (else it is refused, exit 2)."""
    if flags.ocr and not (pictures or flags.pages):
        raise UsageError("--ocr reads the text of pictures (--image, or one piped in) for a "
                         "model without vision; none was given.")
    if not (pictures or flags.pages):
        return [], []
    vision = can_see(app, model)
    files: list[ContextFile] = []
    if flags.pages:
        paged, files = pdf_pages(app, flags, vision)
        pictures = [*pictures, *paged]
    if flags.ocr and not vision:
        files += [ocr_file(app, p) for p in pictures]
        pictures = []
    require_vision(app, model, pictures)
    return pictures, files


def pdf_pages(
    app: App, flags: ChatFlags, vision: bool
) -> tuple[list[Picture], list[ContextFile]]:
    """`-f FILE.pdf --pages N-M`: the pages as pictures for a model that can see, as
    text (each page under a marker; a scanned one read by OCR) for one that cannot."""
    from localgpt_cli.cli.ocr import chat_ocr
    from localgpt_cli.kernel.grounding import ContextFile
    from localgpt_cli.page_images import page_pictures, page_texts, parse_pages

    assert flags.pages is not None
    pages = parse_pages(flags.pages)
    pdfs = [p for p in flags.files if is_pdf(p)]
    if not pdfs:
        raise UsageError("--pages picks pages of a PDF given with -f/--file; none was given.")
    if vision:
        return [pic for p in pdfs for pic in page_pictures(Path(p), pages)], []
    files = []
    for name in pdfs:
        text, warnings = page_texts(Path(name), pages, chat_ocr(app))
        for warning in warnings:
            app.output.warn("ocr_warning", f"{name}: {warning}")
        files.append(ContextFile(path=f"{name} (pages {flags.pages})", text=text))
    return [], files


def ocr_file(app: App, picture: Picture) -> ContextFile:
    """`--ocr`: a picture's text, read by Tesseract, as the question's context for a model
    that cannot see (a piped one redacted, as piped text is); one line and exit 6 when
    it cannot be read or holds no text."""
    from localgpt_cli.cli.ocr import picture_reader
    from localgpt_cli.kernel.grounding import ContextFile
    from localgpt_cli.redact import redact, summary

    try:
        text = picture_reader(app)(picture.given, picture.source).strip()
    except InvalidInput as exc:
        raise InvalidInput(f"{exc.message}; nothing was sent.", code=exc.code,
                           hint=exc.hint) from None
    if not text:
        raise InvalidInput(f"{picture.source}: OCR found no text in it; nothing was sent.",
                           code="empty", hint="A model with vision can look at it: "
                           f"{FIND_VISION}")
    if picture.source == "stdin":
        text, found = redact(text)
        if found:
            app.output.warn("secret_redacted", f"stdin: redacted {summary(found)} before "
                            "the model saw it")
    return ContextFile(path=f"{picture.source} (its text, read by OCR)", text=text)


def can_see(app: App, model: str) -> bool:
    """Whether the model has the `vision` capability (/api/show, or the profile's list)."""
    return "vision" in app.catalog.show(model).capabilities


def require_vision(app: App, model: str, pictures: list[Picture]) -> None:
    """Exit 2 before anything is sent or stored when `model` cannot see `pictures`; a
    picture converted or downscaled on its way is said once."""
    if pictures and not can_see(app, model):
        raise UsageError(
            f"{model} cannot see images (no 'vision' capability); nothing was sent.",
            code="vision_unsupported", hint=f"Models that can: {FIND_VISION} (or --ocr: "
            "send this one the text Tesseract reads in them).")
    for p in pictures:
        if p.changed:
            app.output.warn("image_converted", f"{p.source}: {p.changed}; sent as "
                            f"{p.media_type}, {p.width}x{p.height}.")
