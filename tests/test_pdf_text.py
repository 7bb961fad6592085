"""PDF text through PDFium (issue 26): the same text as pypdf on a test set (character-level
similarity, measured), words hyphenated across a line end found whole, pypdf kept for the
files PDFium refuses (and the document says so), pages and errors as before, and PDFium
loaded only when a PDF is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localgpt_cli.rag.parse import parse_file
from localgpt_cli.tools.files import read_file
from localgpt_cli.tools.sandbox import Sandbox
from tests.bench.pdf import REAL_PDFS, pypdf_pages, similarity, synthetic_set
from tests.cli import ROOT, invoke
from tests.pdfgen import make_pdf, pdf_bytes
from tests.requires import unavailable

# The lowest character-level similarity (difflib ratio, pages weighted by length) to pypdf's
# text accepted on any PDF of the set; measured 0.993 on the worst (libtasn1, its hyphens
# joined and its © drawn as "c" plus a circle) and 1.0 on the synthetic ones.
MIN_SIMILARITY = 0.98

HYPHENATED = "Distinguished Encoding Rules manip-\nulation of the struc-\nture, well-known terms"


def refused_by_pdfium(pages: list[str]) -> bytes:
    """A PDF that PDFium refuses and pypdf reads: 1100 blank lines before the header (as a
    mail or a web server that prepends a preamble leaves it); PDFium looks for `%PDF-` in
    the first 1024 bytes only."""
    return b"\n" * 1100 + pdf_bytes(pages)


def _texts(path: Path) -> list[tuple[int, str]]:
    doc = parse_file(path)
    assert doc.warnings == [], path  # no repair reported on a sound file
    return [(s.page, s.text) for s in doc.sections]


def test_text_matches_pypdf_on_the_synthetic_set(tmp_path: Path) -> None:
    for path in synthetic_set(tmp_path):
        ours = _texts(path)
        theirs = [(n, t) for n, t in enumerate(pypdf_pages(path), 1) if t.strip()]
        assert [n for n, _ in ours] == [n for n, _ in theirs], path.name  # same pages kept
        assert similarity([t for _, t in theirs], [t for _, t in ours]) >= MIN_SIMILARITY


def test_text_matches_pypdf_on_real_pdfs() -> None:
    present = [p for p in REAL_PDFS if p.is_file()]
    if len(present) < len(REAL_PDFS):
        unavailable("the Debian manuals in tests/bench/pdf.py REAL_PDFS (libtasn1-doc)")
    for path in present:
        ours = dict(_texts(path))
        theirs = pypdf_pages(path)
        assert set(ours) == {n for n, t in enumerate(theirs, 1) if t.strip()}
        mine = [ours.get(n, "") for n in range(1, len(theirs) + 1)]
        assert similarity(theirs, mine) >= MIN_SIMILARITY, path


def test_a_word_hyphenated_across_lines_is_stored_whole(standin, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_pdf(corpus / "der.pdf", ["Cover page", HYPHENATED])
    assert invoke("ingest", str(corpus), "--json").exit_code == 0
    (doc,) = invoke("docs", "list", "--json").records()
    chunks = invoke("docs", "show", doc["document_id"], "--json").records()
    assert [c["page"] for c in chunks] == [1, 2]
    assert "manipulation of the structure" in chunks[1]["text"]
    hits = invoke("search", "manipulation", "--mode", "keyword", "--json").records()
    assert [(h["page"], h["path"].endswith("der.pdf")) for h in hits] == [(2, True)]


def test_a_pdf_pdfium_refuses_is_read_with_pypdf_and_says_so(standin, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "preamble.pdf").write_bytes(refused_by_pdfium(["First page", "Second page"]))
    r = invoke("ingest", str(corpus), "--json")
    assert r.exit_code == 0, r.stderr
    warnings = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    path = corpus / "preamble.pdf"
    assert [w["message"] for w in warnings if w["code"] == "parse_warning"] == [
        f"{path}: PDFium could not open it (Data format error); read with pypdf",
        f"{path}: damaged PDF, read with repairs (invalid pdf header: {chr(10).encode() * 5!r})",
    ]
    (doc,) = invoke("docs", "list", "--json").records()
    chunks = invoke("docs", "show", doc["document_id"], "--json").records()
    assert [(c["page"], c["text"]) for c in chunks] == [(1, "First page"), (2, "Second page")]


def test_read_file_reads_pdfium_and_pypdf_pdfs_alike(tmp_path: Path) -> None:
    make_pdf(tmp_path / "der.pdf", [HYPHENATED])
    (tmp_path / "preamble.pdf").write_bytes(refused_by_pdfium(["Only page"]))
    sandbox = Sandbox([tmp_path], base=tmp_path)
    assert "manipulation of the structure" in read_file(sandbox, "der.pdf", page=1)
    assert read_file(sandbox, "preamble.pdf") == "--- page 1 ---\nOnly page"


@pytest.mark.parametrize("reader", ["parse", "read_file"])
def test_pdfium_loads_only_when_a_pdf_is_read_and_pypdf_not_at_all(
    tmp_path: Path, reader: str
) -> None:
    pdf = make_pdf(tmp_path / "a.pdf", ["Some text"])
    call = (
        f"from localgpt_cli.rag.parse import parse_file; parse_file(Path({str(pdf)!r}))"
        if reader == "parse"
        else "from localgpt_cli.tools.files import read_file;"
        f" from localgpt_cli.tools.sandbox import Sandbox;"
        f" read_file(Sandbox([Path({str(tmp_path)!r})], base=Path({str(tmp_path)!r})), 'a.pdf')"
    )
    code = (
        "import sys; from pathlib import Path\n"
        "before = 'pypdfium2' in sys.modules\n"
        f"{call}\n"
        "print(before, 'pypdfium2' in sys.modules, 'pypdf' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False"]
