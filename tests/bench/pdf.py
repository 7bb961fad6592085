"""PDF text: pages/s of pypdf and PDFium on the same PDFs in one run, their character-level
similarity, and the PDF share of an ingest before (pypdf) and after (PDFium).

    python -m tests.bench.pdf [--runs 3] [--files 400] [--ingest-runs 1] [--json]

1. Each PDF of the set (Debian's libtasn1 manual and shared-mime-info spec when installed,
   and synthetic PDFs from tests/pdfgen.py) is read page by page with pypdf (the extractor
   before issue 26) and with PDFium through localgpt_cli/pdf_text.py, round-robin, `--runs`
   times; the medians give pages/s. Similarity: difflib's ratio page by page, weighted by
   the pages' lengths (1.0 = the same characters).
2. A mixed corpus (tests/bench/ingest.py's generator, `--files` files, with the PDFs of the
   set copied in) is ingested by a `localgpt ingest` process against the Ollama stand-in,
   as shipped and with PDFium made to refuse every file (so parse_pdf falls back to pypdf:
   the code before issue 26), alternated `--ingest-runs` times, each into a new home. The
   child adds up the seconds spent in parse_pdf; the PDF share is that over the ingest's
   own time (its summary's `ms`); pages/s is the corpus's PDF pages over those seconds.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.common import ROOT
from tests.pdfgen import make_pdf

REAL_PDFS = (
    Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
)


def synthetic_set(folder: Path) -> list[Path]:
    """Generated PDFs: prose on 20 pages, WinAnsi accents and PDF delimiters, blank pages."""
    import numpy as np

    from tests.bench.ingest import _prose, _wrap

    rng = np.random.default_rng(3)
    folder.mkdir(parents=True, exist_ok=True)
    prose = [_wrap(_prose(rng, 2500).replace("\n\n", " ")) for _ in range(20)]
    accents = [
        "Café, naïve façade – “quoted” (parentheses) \\ backslash",
        "",
        "Größe: 3 × 4 € ± 1 ‰\nZeile zwei; ¿qué? ¡sí!",
    ]
    return [
        make_pdf(folder / "prose-20p.pdf", prose),
        make_pdf(folder / "accents.pdf", accents),
        make_pdf(folder / "short.pdf", ["One line.", "Two\nlines."]),
    ]


def pypdf_pages(path: Path) -> list[str]:
    """Each page's text as pypdf extracts it (ingest's extractor before issue 26)."""
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def pdfium_pages(path: Path) -> list[str]:
    """Each page's text as ingest stores it now."""
    from localgpt_cli.pdf_text import open_pdf

    with open_pdf(path) as pdf:
        return [pdf.text(n) for n in range(1, pdf.count + 1)]


def similarity(a: list[str], b: list[str]) -> float:
    """Character-level similarity of two page lists: 2·matches / all characters."""
    matched = total = 0
    for left, right in zip(a, b, strict=True):
        matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
        matched += sum(block.size for block in matcher.get_matching_blocks())
        total += len(left) + len(right)
    return 2 * matched / total if total else 1.0


def _timed(fn: Callable[[Path], list[str]], path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def extraction(paths: list[Path], runs: int) -> list[dict[str, Any]]:
    """pages/s of both extractors per PDF (medians of round-robin runs) and similarity."""
    rows = []
    for path in paths:
        old, new = pypdf_pages(path), pdfium_pages(path)  # also warms imports and cache
        times: dict[str, list[float]] = {"pypdf": [], "pdfium": []}
        for _ in range(runs):
            times["pypdf"].append(_timed(pypdf_pages, path))
            times["pdfium"].append(_timed(pdfium_pages, path))
        median = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        rows.append({
            "pdf": path.name, "pages": len(old),
            "chars_pypdf": sum(map(len, old)), "chars_pdfium": sum(map(len, new)),
            "pypdf_pages_s": round(len(old) / median["pypdf"], 1),
            "pdfium_pages_s": round(len(old) / median["pdfium"], 1),
            "speedup": round(median["pypdf"] / median["pdfium"], 1),
            "similarity": round(similarity(old, new), 4),
        })  # fmt: skip
    return rows


def child(mode: str, argv: list[str]) -> None:
    """One ingest in this process, parse_pdf timed; `pypdf` makes PDFium refuse every file."""
    import localgpt_cli.rag.parse.pdf as parse_pdf_module
    from localgpt_cli.cli.main import main
    from localgpt_cli.pdf_text import PdfRefused

    if mode == "pypdf":

        def refuse(source: object) -> Any:
            raise PdfRefused("benchmark: the pypdf path")

        parse_pdf_module.open_pdf = refuse  # type: ignore[assignment]
    spent = [0.0]
    real = parse_pdf_module.parse_pdf

    def timed(path: Path) -> Any:
        start = time.perf_counter()
        try:
            return real(path)
        finally:
            spent[0] += time.perf_counter() - start

    parse_pdf_module.parse_pdf = timed  # type: ignore[assignment]
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    sys.stderr.write(f"\npdf_parse_s={spent[0]}\n")
    sys.stderr.flush()
    os._exit(code)


def _ingest(mode: str, corpus: Path, home: Path, host: str) -> tuple[float, float]:
    """Seconds of one ingest (its summary's `ms`) and of its parse_pdf calls."""
    env = {**os.environ, "OLLAMA_HOST": host, "LOCALGPT_HOME": str(home)}
    for var in ("LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_EMBED_MODEL"):
        env.pop(var, None)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench.pdf", "--child", mode, "ingest", str(corpus), "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = [json.loads(x) for x in proc.stdout.splitlines() if '"summary"' in x][-1]
    return summary["ms"] / 1000, float(proc.stderr.rsplit("pdf_parse_s=", 1)[1].split()[0])


def ingest_share(paths: list[Path], files: int, runs: int) -> dict[str, Any]:
    """The PDF share of an ingest of the same corpus, pypdf and PDFium alternated `runs`
    times (each into a new home), medians."""
    from tests.bench.ingest import generate
    from tests.standin import StandIn

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-pdf-") as tmp, StandIn() as standin:
        corpus = Path(tmp) / "corpus"
        size = generate(corpus, files, files / 100)
        for path in paths:
            shutil.copy(path, corpus / path.name)
            size += path.stat().st_size
        pdfs = list(corpus.rglob("*.pdf"))
        pages = sum(len(pypdf_pages(p)) for p in pdfs)
        out["corpus"] = {"files": files + len(paths), "mb": round(size / 1e6, 1),
                         "pdfs": len(pdfs), "pdf_pages": pages}  # fmt: skip
        samples: dict[str, list[tuple[float, float]]] = {"pypdf": [], "pdfium": []}
        for run in range(runs):
            for mode in samples:
                home = Path(tmp) / f"home-{mode}-{run}"
                samples[mode].append(_ingest(mode, corpus, home, standin.url))
        for mode, got in samples.items():
            ingest_s = sorted(t for t, _ in got)[len(got) // 2]
            pdf_s = sorted(p for _, p in got)[len(got) // 2]
            out[mode] = {"ingest_s": round(ingest_s, 1), "pdf_parse_s": round(pdf_s, 2),
                         "pdf_share": round(pdf_s / ingest_s, 3),
                         "pdf_pages_s": round(pages / pdf_s, 1)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m tests.bench.pdf", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=400, help="generated files of the ingest")
    parser.add_argument("--ingest-runs", type=int, default=1, help="ingests of each kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-pdfset-") as tmp:
        paths = [p for p in REAL_PDFS if p.is_file()] + synthetic_set(Path(tmp))
        figures: dict[str, Any] = {"extraction": extraction(paths, args.runs)}
        figures["ingest"] = ingest_share(paths, args.files, args.ingest_runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'pdf':32} {'pages':>5} {'pypdf p/s':>10} {'PDFium p/s':>10} {'x':>5} {'similar':>8}")
    for row in figures["extraction"]:
        print(f"{row['pdf']:32} {row['pages']:5} {row['pypdf_pages_s']:10} "
              f"{row['pdfium_pages_s']:10} {row['speedup']:5} {row['similarity']:8}")  # fmt: skip
    for part, values in figures["ingest"].items():
        print(f"ingest {part}: {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
