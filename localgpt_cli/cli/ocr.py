"""The OCR settings of a command (`[ingest] ocr`, `ocr_languages`, `ocr_page_timeout`) and
the picture reader built from them for a model that cannot see.

Ingest reads scans with them; `chat` reads with the same languages and page time limit
the pictures a text model is given: read_file's (wired into the tools as a callable, so
the tools and the kernel never import the parsers), `--image`/piped ones with `--ocr`,
and the `--pages` of a PDF without a usable text layer. Tesseract runs only in
rag/parse/ocr.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.cli.app import App
    from localgpt_cli.rag.parse.ocr import OcrSettings
    from localgpt_cli.tools.picture_read import OcrFn


def ocr_settings(app: App, mode: str | None = None) -> OcrSettings:
    """--ocr (`mode`), else [ingest] ocr, with ocr_languages and ocr_page_timeout; a bad
    value is one line naming where it was set."""
    from localgpt_cli.errors import setting_error
    from localgpt_cli.rag.parse.ocr import MODES, OcrSettings

    values, named = app.settings.values, app.settings.named
    mode = mode or str(values["ingest.ocr"]).strip().lower()
    if mode not in MODES:
        where = named("ingest.ocr")
        raise setting_error(where, f"ingest.ocr {mode!r} ({where}) is not one of "
                            f"{', '.join(MODES)}.")  # fmt: skip
    languages = str(values["ingest.ocr_languages"]).strip().replace(" ", "")
    if not languages:
        where = named("ingest.ocr_languages")
        raise setting_error(where, f"ingest.ocr_languages ({where}) is empty.",
                            hint="Name Tesseract language packs, e.g. eng+deu.")  # fmt: skip
    timeout = float(values["ingest.ocr_page_timeout"])
    if timeout <= 0:
        where = named("ingest.ocr_page_timeout")
        raise setting_error(where, f"ingest.ocr_page_timeout ({where}) must be positive.")
    return OcrSettings(mode=mode, languages=languages, page_timeout=timeout)


def chat_ocr(app: App) -> OcrSettings:
    """The settings `chat` reads with: ingest's languages and page limit; `auto` (read
    what has no usable text), whatever ingest's own mode is."""
    return ocr_settings(app, "auto")


def picture_reader(app: App) -> OcrFn:
    """Read a picture's text for a model that cannot see it (rag/parse/image.py); the
    settings are looked at when the first picture is read, so a bad one does not stop a
    chat that reads none. Raises the LocalGPTError that says why it cannot."""

    def read(data: bytes, source: str) -> str:
        from localgpt_cli.rag.parse.image import picture_text

        return picture_text(data, source, chat_ocr(app))

    return read
