"""Pictures for vision models: what readying one costs before it is sent (images.py and
page_images.py), medians of `--runs` in one process.

    python -m tests.bench.images [--runs 7] [--json]

- a 1024x768 PNG photo-like picture (noise): checked (decoded whole) and sent as is;
- a 4000x3000 JPEG (a 12 MP phone photo): decoded, downscaled to 2048, re-encoded;
- a 1600x1200 WebP: decoded and converted to PNG;
- a Letter PDF page rendered at 150 dpi by PDFium and encoded as PNG;
- and the cost of importing Pillow, in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from localgpt_cli.images import picture
from localgpt_cli.page_images import page_pictures
from tests.pdfgen import make_pdf


def _encoded(width: int, height: int, kind: str) -> bytes:
    from PIL import Image

    noise = Image.effect_noise((width, height), 64).convert("RGB")
    out = io.BytesIO()
    noise.save(out, kind, **({"quality": 90} if kind == "JPEG" else {}))
    return out.getvalue()


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)


def _import_ms(runs: int) -> float:
    code = "import time; t = time.perf_counter(); from PIL import Image; " \
           "print((time.perf_counter() - t) * 1000)"
    return round(statistics.median(float(subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(runs)), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    png, jpeg, webp = (_encoded(1024, 768, "PNG"), _encoded(4000, 3000, "JPEG"),
                       _encoded(1600, 1200, "WEBP"))
    with tempfile.TemporaryDirectory() as tmp:
        pdf = make_pdf(Path(tmp) / "a.pdf", ["a page of text " * 40])
        rows = {
            "png_1024x768_as_is_ms": _median_ms(lambda: picture(png, "p"), args.runs),
            "jpeg_4000x3000_downscaled_ms": _median_ms(lambda: picture(jpeg, "j"), args.runs),
            "webp_1600x1200_to_png_ms": _median_ms(lambda: picture(webp, "w"), args.runs),
            "pdf_page_150dpi_ms": _median_ms(lambda: page_pictures(pdf, [1]), args.runs),
            "pillow_import_ms": _import_ms(args.runs),
        }
    rows["bytes"] = {"png": len(png), "jpeg": len(jpeg), "webp": len(webp),
                     "jpeg_sent": len(picture(jpeg, "j").data)}
    if args.json:
        print(json.dumps(rows))
    else:
        for key, value in rows.items():
            print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
