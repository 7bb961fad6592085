"""read_file on a picture: the picture for a model that can see it, its OCR text for one
that cannot.

The tool does not know which model reads its result, so it returns both ways of seeing
the picture and the agent loop (kernel/loop.py), which knows the model's capabilities,
picks one: a vision model is shown the picture on the next request; a text model gets
the text Tesseract reads in it, through the `ocr` callable `cli/toolbox.py` wires to
rag/parse (the tools never import the parsers), redacted like any text read_file returns,
and read only then (a vision model's turn runs no OCR).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from localgpt_cli.errors import InvalidInput, LocalGPTError
from localgpt_cli.images import Picture, picture
from localgpt_cli.tools.base import ToolError, cut
from localgpt_cli.tools.sandbox import Sandbox

# A picture's bytes and what to call it -> the text OCR reads in it (LocalGPTError: why not).
OcrFn = Callable[[bytes, str], str]


@dataclass(frozen=True)
class PictureRead:
    """What read_file returns for a picture: `picture` for a model that can see, and
    `text()`, its OCR text, for one that cannot (None: no OCR here, `localgpt tools`)."""

    picture: Picture
    text: Callable[[], str] | None = None

    def __str__(self) -> str:
        return f"{self.picture.describe()} is an image"


def picture_read(
    sandbox: Sandbox, data: bytes, path: str, max_chars: int, ocr: OcrFn | None
) -> PictureRead:
    """The picture in `data`, checked (not a picture, too large or damaged: a ToolError),
    with its text read on demand by `ocr`."""
    try:
        shown = picture(data, path)
    except InvalidInput as exc:
        raise ToolError(exc.message.replace("; nothing was sent", "")) from None
    if ocr is None:
        return PictureRead(shown)

    def text() -> str:
        what = f"{shown.describe()} is an image and this model cannot see images"
        try:
            found = ocr(data, path).strip()
        except LocalGPTError as exc:  # no Tesseract, a missing language pack, a failed page
            why = exc.message.removeprefix(f"{path}: ")  # the path is said once
            raise ToolError(f"{what}; {why}") from None
        except Exception as exc:  # runs outside the tool's isolation: contained here
            raise ToolError(f"{what}; OCR failed ({type(exc).__name__}: {exc})") from None
        if not found:
            return f"{what}; OCR found no text in it. Say so rather than guess what it shows."
        found = cut(sandbox.redacted(found, path), max_chars, "of its text")
        return f"{what}; this is the text OCR (Tesseract) read in it:\n\n{found}"

    return PictureRead(shown, text)
