"""Scanned pages made here, of known text: rendered in a real font (Debian's DejaVu and
Liberation), at a resolution, turned slightly (as a sheet on a scanner) and noised, then
saved as an image-only PDF, a PNG or a multi-page TIFF. The OCR tests and
`tests/bench/ocr.py` read them back and compare with the text they were made from.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

FONTS = {
    "DejaVu Sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "Liberation Serif": "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
}

# Plain prose of the kind people scan: the bench's pages cycle through these lines.
LINES = (
    "The quarterly maintenance window for the storage cluster starts on Tuesday",
    "at nine in the evening and lasts four hours. During that time the backup jobs",
    "are paused and the replication lag may grow to thirty minutes. Operators must",
    "confirm the snapshot checksums before the window closes, and write the results",
    "into the shared log with their initials. If a disk reports more than twelve",
    "reallocated sectors it is replaced the same night. The spare parts cabinet holds",
    "six drives of each size; order more when only two remain in the cabinet.",
    "Contact the engineer on call through the pager rota, never by a personal phone.",
    "Invoices from the hosting company arrive on the first working day of the month",
    "and must be approved by the finance team within ten days of their arrival.",
)


def require_ocr() -> None:
    """The real Tesseract and the fonts the pages are drawn in, or `unavailable` (a skip
    on a developer's machine, a failure under CI)."""
    import shutil

    from tests.requires import unavailable

    if shutil.which("tesseract") is None:
        unavailable("Tesseract is not installed (apt install tesseract-ocr)")
    if missing_fonts():
        unavailable(f"fonts {missing_fonts()} are missing (apt install fonts-liberation)")


def missing_fonts() -> list[str]:
    """The fonts of FONTS this machine lacks (the Debian packages that hold them)."""
    return [name for name, path in FONTS.items() if not Path(path).exists()]


def page(
    lines: list[str],
    *,
    font: str = "DejaVu Sans",
    dpi: int = 300,
    angle: float = 0.0,
    noise: float = 0.0,
    width_in: float = 8.27,
    seed: int = 1,
) -> Any:
    """A grey PIL image of `lines` in 11 pt `font` at `dpi` (A4 wide), turned by
    `angle` degrees, with `noise` of its pixels flipped (salt and pepper)."""
    from PIL import Image, ImageDraw, ImageFont

    size = round(11 / 72 * dpi)
    height = round((1.2 + len(lines) * 1.5 * 11 / 72) * dpi)
    image = Image.new("L", (round(width_in * dpi), height), 255)
    draw = ImageDraw.Draw(image)
    face = ImageFont.truetype(FONTS[font], size)
    for i, line in enumerate(lines):
        draw.text((round(0.6 * dpi), round(0.6 * dpi + i * 1.5 * size)), line, font=face, fill=0)
    if angle:
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if noise:
        rnd = random.Random(seed)
        pixels = image.load()
        w, h = image.size
        for _ in range(int(w * h * noise)):
            x, y = rnd.randrange(w), rnd.randrange(h)
            pixels[x, y] = 0 if pixels[x, y] > 127 else 255
    image.info["dpi"] = (dpi, dpi)
    return image


def save_pdf(path: Path, images: list[Any], dpi: int) -> Path:
    """An image-only PDF (no text layer), one page per image, as a scanner writes it."""
    images = [image.copy() for image in images]  # saving leaves settings on an image
    images[0].save(path, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return path


def save_tiff(path: Path, images: list[Any], dpi: int) -> Path:
    """A multi-page TIFF (one frame per image)."""
    images = [image.copy() for image in images]
    images[0].save(path, "TIFF", dpi=(dpi, dpi), save_all=True, append_images=images[1:],
                   compression="tiff_deflate")  # fmt: skip
    return path


def cer(expected: str, got: str) -> float:
    """Character error rate: edit distance between the texts (whitespace runs made one
    space) over the expected text's length."""
    a, b = " ".join(expected.split()), " ".join(got.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(len(a), 1)
