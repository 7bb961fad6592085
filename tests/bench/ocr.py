"""OCR quality and speed on scanned pages made here (issue 27): the character error rate
against the known text, and pages/s on the cores this process may use.

    python -m tests.bench.ocr [--pages 4] [--workers 2] [--json]
    PYTHONPATH=/path/to/tesserocr-site python -m tests.bench.ocr --engines

1. Quality: `--pages` pages of known prose (tests/ocrpages.py's lines) per font (DejaVu
   Sans, Liberation Serif) and resolution (150, 300 dpi), turned +-2 degrees and noised
   (0.1% of pixels flipped), saved as image-only PDFs and as PNG (300 dpi) or multi-page
   TIFF (150 dpi), are read through `parse_file` as ingest reads them (`--ocr auto`:
   PDFium draws each PDF page at 300 dpi, Tesseract reads it). CER: edit distance over
   the known text's length, whitespace runs made one space; the median page is reported.
2. Speed: the 300 dpi PDF pages read by `--workers` threads at once (each page is its
   own `tesseract` process, as in an ingest worker pool), pages over wall seconds; and
   the CPU seconds one page costs (Tesseract's children's user+sys).
3. `--engines`: the same page read by a `tesseract` process (what ingest does) and by
   tesserocr's C API in this process (when importable), CPU seconds each, 5 runs,
   medians: what the choice of a process per page costs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.ocrpages import FONTS, LINES, cer, page, save_pdf, save_tiff


def _texts(pages: int) -> list[list[str]]:
    """`pages` pages of 8 lines each, cycling through LINES from a different line."""
    return [[LINES[(p * 3 + i) % len(LINES)] for i in range(8)] for p in range(pages)]


def make_set(folder: Path, pages: int) -> list[tuple[str, int, str, Path, list[list[str]]]]:
    """(font, dpi, format, file, texts) for every font, resolution and format."""
    out = []
    texts = _texts(pages)
    for font in FONTS:
        for dpi in (150, 300):
            images = [page(t, font=font, dpi=dpi, angle=2.0 if i % 2 else -2.0, noise=0.001,
                           seed=i) for i, t in enumerate(texts)]  # fmt: skip
            stem = f"{font.replace(' ', '')}-{dpi}"
            out.append((font, dpi, "pdf", save_pdf(folder / f"{stem}.pdf", images, dpi), texts))
            if dpi == 300:
                for i, image in enumerate(images):
                    image.save(folder / f"{stem}-{i + 1}.png", dpi=(dpi, dpi))
                out.append((font, dpi, "png", folder / f"{stem}-1.png", texts[:1]))
            else:
                out.append((font, dpi, "tiff", save_tiff(folder / f"{stem}.tiff", images, dpi),
                            texts))  # fmt: skip
    return out


def quality(rows: list[tuple[str, int, str, Path, list[list[str]]]]) -> list[dict[str, Any]]:
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.parse.ocr import OcrSettings

    results = []
    for font, dpi, fmt, path, texts in rows:
        doc = parse_file(path, ocr=OcrSettings())
        got = {s.page: s for s in doc.sections}
        rates = [cer("\n".join(t), got[i + 1].text if i + 1 in got else "")
                 for i, t in enumerate(texts)]  # fmt: skip
        confidence = [s.ocr_confidence or 0.0 for s in doc.sections]
        results.append({"font": font, "dpi": dpi, "format": fmt, "pages": len(texts),
                        "cer_median": round(statistics.median(rates), 4),
                        "cer_max": round(max(rates), 4),
                        "confidence_median": statistics.median(confidence)})  # fmt: skip
    return results


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def speed(folder: Path, workers: int) -> dict[str, Any]:
    """Pages/s of the 300 dpi PNG pages read `workers` at a time, and CPU s per page."""
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.parse.ocr import OcrSettings

    pngs = sorted(folder.glob("*-300-*.png"))
    cpu, start = _children_cpu(), time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda p: parse_file(p, ocr=OcrSettings()), pngs))
    wall = time.perf_counter() - start
    return {"pages": len(pngs), "workers": workers, "seconds": round(wall, 2),
            "pages_per_s": round(len(pngs) / wall, 2),
            "cpu_s_per_page": round((_children_cpu() - cpu) / len(pngs), 2)}  # fmt: skip


def engines(folder: Path, runs: int = 5) -> dict[str, Any]:
    """CPU s per page: a `tesseract` process per page vs tesserocr in this process."""
    from PIL import Image

    from localgpt_cli.rag.parse.ocr import OcrSettings, read_page

    image = Image.open(next(iter(sorted(folder.glob("*-300-*.png")))))
    image.load()
    process = []
    for _ in range(runs):
        cpu = _children_cpu()
        read_page(image, OcrSettings())
        process.append(_children_cpu() - cpu)
    out: dict[str, Any] = {"process_cpu_s": round(statistics.median(process), 3)}
    try:
        import tesserocr
    except ImportError:
        out["tesserocr"] = "not importable"
        return out
    own = resource.getrusage(resource.RUSAGE_SELF)
    api = tesserocr.PyTessBaseAPI(path="/usr/share/tesseract-ocr/5/tessdata", lang="eng")
    after = resource.getrusage(resource.RUSAGE_SELF)
    out["tesserocr_init_cpu_s"] = round(after.ru_utime - own.ru_utime, 3)
    inproc = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        api.SetImage(image)
        api.SetSourceResolution(300)
        api.GetUTF8Text()
        inproc.append(resource.getrusage(resource.RUSAGE_SELF).ru_utime - before)
    out["tesserocr_cpu_s"] = round(statistics.median(inproc), 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engines", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = make_set(folder, args.pages)
        report: dict[str, Any] = {"quality": quality(rows), "speed": speed(folder, args.workers)}
        if args.engines:
            report["engines"] = engines(folder)
    if args.json:
        print(json.dumps(report))
        return
    for q in report["quality"]:
        print(f"{q['font']:17} {q['dpi']:>3} dpi {q['format']:4} {q['pages']} pages: CER median "
              f"{q['cer_median']:.2%}, max {q['cer_max']:.2%}; confidence {q['confidence_median']}")
    s = report["speed"]
    print(f"speed: {s['pages']} pages at 300 dpi, {s['workers']} at once: {s['pages_per_s']} "
          f"pages/s ({s['seconds']} s); {s['cpu_s_per_page']} CPU s per page")
    if "engines" in report:
        print("engines:", json.dumps(report["engines"]))


if __name__ == "__main__":
    main()
