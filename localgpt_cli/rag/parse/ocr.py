"""Page images -> text through Tesseract, one `tesseract` process per page.

Why a process per page rather than `tesserocr` (Tesseract's C API in this process) or
`pytesseract`: a page that makes Tesseract hang or crash must fail alone, within a time
limit, and a C call cannot be stopped; a child process can (killed at `page_timeout`).
It costs Tesseract's start, 0.19 CPU s a page, beside ~1 s of recognition at 300 dpi
(README, OCR: `python -m tests.bench.ocr --engines`).
pytesseract would add a dependency that writes the image to a temporary file and runs
the same binary. The page is turned straight first (`deskewed`), goes to Tesseract's
stdin as an uncompressed PGM (no PNG encoding), and its TSV output gives each word's
confidence. `OMP_THREAD_LIMIT=1`: its OpenMP threads made a page twice as slow on a loaded
2-core machine, and the ingest's worker pool gives parallelism across pages anyway.

Pillow (a dependency of localgpt) holds the images; it is imported only when a page is read.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import statistics
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from localgpt_cli.errors import InvalidInput

MODES = ("auto", "always", "never")
DEFAULT_LANGUAGES = "eng"
DEFAULT_DPI = 300
DEFAULT_PAGE_TIMEOUT = 120.0
# A page whose words Tesseract is on average less sure of (0-100) is kept, with a warning.
CONFIDENCE_FLOOR = 60.0


@dataclass(frozen=True)
class OcrSettings:
    """How ingest reads pages without a usable text layer (`ingest --ocr`, [ingest] ocr*)."""

    mode: str = "auto"  # auto: pages without usable text; always: every page; never
    languages: str = DEFAULT_LANGUAGES  # Tesseract's -l, e.g. eng+deu
    dpi: int = DEFAULT_DPI
    page_timeout: float = DEFAULT_PAGE_TIMEOUT

    def key(self) -> str:
        """What OCR'd rows depend on, for the manifest's options (empty at the defaults,
        so documents ingested before OCR existed are not read again for nothing)."""
        if (self.mode, self.languages, self.dpi) == ("auto", DEFAULT_LANGUAGES, DEFAULT_DPI):
            return ""
        return f"/ocr={self.mode}:{self.languages}:{self.dpi}"


@dataclass
class PageText:
    """One page as Tesseract read it: its text and its words' mean confidence (0-100)."""

    text: str
    confidence: float


class OcrPageError(Exception):
    """Tesseract failed on one page (died, hung, refused the image): that page fails alone."""


def install_hint() -> str:
    """How to get Tesseract on this platform: what a `no_text` message names."""
    if sys.platform == "darwin":
        return "brew install tesseract"
    if sys.platform == "win32":
        return "winget install UB-Mannheim.TesseractOCR"
    return "apt install tesseract-ocr, or dnf install tesseract"


def missing() -> str | None:
    """Why OCR cannot run here (what to install), or None when it can."""
    if shutil.which("tesseract") is None:
        return f"Tesseract is not installed: {install_hint()}"
    return None


@functools.cache
def installed_languages(binary: str) -> frozenset[str]:
    """The language packs this Tesseract has (`--list-langs`), asked once a process."""
    try:
        done = subprocess.run(
            [binary, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    lines = (done.stdout + done.stderr).splitlines()
    return frozenset(line.strip() for line in lines if line and " " not in line.strip())


def check_languages(settings: OcrSettings, where: str) -> None:
    """Raise InvalidInput (code `ocr_language`) when a language pack is missing."""
    have = installed_languages(shutil.which("tesseract") or "tesseract")
    lacking = [lang for lang in settings.languages.split("+") if lang and lang not in have]
    if lacking:
        packs = " ".join(f"tesseract-ocr-{lang}" for lang in lacking)
        raise InvalidInput(
            f"{where}: OCR language {', '.join(lacking)} is not installed (Tesseract has "
            f"{', '.join(sorted(have)) or 'none'}); install it (apt install {packs}; "
            "macOS: brew install tesseract-lang) or change [ingest] ocr_languages",
            code="ocr_language",
        )


def read_page(image: Any, settings: OcrSettings, dpi: int | None = None) -> PageText:
    """The text of one page image (a PIL image of `dpi`, else the settings'), read by a
    Tesseract process of its own; OcrPageError when it fails or outlives the time limit."""
    buffer = io.BytesIO()
    deskewed(image.convert("L")).save(buffer, format="PPM")  # a PGM: no compression to pay
    command = [
        shutil.which("tesseract") or "tesseract", "stdin", "stdout",
        "-l", settings.languages, "--dpi", str(dpi or settings.dpi), "tsv",
    ]  # fmt: skip
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(
            command,
            input=buffer.getvalue(),
            capture_output=True,
            timeout=settings.page_timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OcrPageError(
            f"Tesseract gave no text in {settings.page_timeout:g} s (stopped; "
            "raise [ingest] ocr_page_timeout)"
        ) from None
    except OSError as exc:
        raise OcrPageError(f"Tesseract could not start ({exc.strerror or exc})") from exc
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise OcrPageError(f"Tesseract died ({name})")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OcrPageError(f"Tesseract failed ({said[-1] if said else done.returncode})")
    return tsv_page(done.stdout.decode("utf-8", "replace"))


def deskewed(grey: Any) -> Any:
    """The page turned straight: Tesseract 5.3 dropped three of eight lines of a page
    scanned 2 degrees askew (tests/bench/ocr.py), and read them all once it was turned.
    The angle is the one (within 3 degrees, to a quarter) whose rows are most unlike each
    other (lines of text and the gaps between them), found on a 600-pixel-wide copy:
    whole degrees first, then quarters around the best."""
    from PIL import Image

    small = grey.reduce(max(1, grey.width // 600))

    def contrast(angle: float) -> float:
        turned = small.rotate(angle, resample=Image.Resampling.BILINEAR, fillcolor=255)
        rows = turned.resize((1, turned.height), Image.Resampling.BOX)
        return statistics.pvariance(rows.tobytes())

    coarse = max(range(-3, 4), key=contrast)
    angle = max((coarse + i / 4 for i in range(-3, 4)), key=contrast)
    if angle == 0:
        return grey
    return grey.rotate(angle, resample=Image.Resampling.BILINEAR, fillcolor=255, expand=True)


def tsv_page(tsv: str) -> PageText:
    """Tesseract's TSV -> the page's text (lines in reading order, a blank line between
    paragraphs) and the mean confidence of its words."""
    lines: dict[tuple[int, int, int], list[str]] = {}
    confidences: list[float] = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue
        lines.setdefault((int(cells[2]), int(cells[3]), int(cells[4])), []).append(cells[11])
        conf = float(cells[10])
        if conf >= 0:
            confidences.append(conf)
    out: list[str] = []
    last: tuple[int, int] | None = None
    for (block, par, _line), words in lines.items():
        if last is not None and (block, par) != last:
            out.append("")
        out.append(" ".join(words))
        last = (block, par)
    mean = sum(confidences) / len(confidences) if confidences else 0.0
    return PageText("\n".join(out), round(mean, 1))
