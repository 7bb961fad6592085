"""The document-title rule per file type, and the embedding input built from it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from localgpt_cli.rag.parse import parse_file
from localgpt_cli.rag.titles import MAX_TITLE_CHARS, document_title, embed_body
from localgpt_cli.rag.types import ParsedDocument, Section
from tests.pdfgen import pdf_bytes
from tests.test_parse import _paragraph, make_docx


def title_of(path: Path, content: str) -> str | None:
    path.write_text(content, encoding="utf-8")
    return document_title(parse_file(path))


def pdf_with_title(path: Path, pages: list[str], title: str | None) -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    if title is not None:
        writer.add_metadata({"/Title": title})
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


def test_text_title_is_its_first_non_empty_line(tmp_path: Path) -> None:
    body = "\n\n  flow past a  swept wing .  \n\nexperimental results are given.\n"
    assert title_of(tmp_path / "1.txt", body) == "flow past a swept wing ."


def test_long_first_line_is_cut_at_a_word_boundary(tmp_path: Path) -> None:
    title = title_of(tmp_path / "long.txt", "word " * 100 + "\nbody")
    assert title is not None and len(title) <= MAX_TITLE_CHARS
    assert title == " ".join(["word"] * 24)  # 24 words = 119 characters


@pytest.mark.parametrize(
    ("content", "title"),
    [
        ("---\ntags: [a]\n---\nIntro line.\n\n# Install guide\n\nSteps.\n", "Install guide"),
        ("Install  Guide\n=============\n\nSteps.\n\n## Linux\n\nMore.\n", "Install Guide"),
        ("## Linux\n\nSteps.\n\n# Later top heading\n", "Linux"),
        ("No heading at all.\nSecond line.\n", "No heading at all."),
    ],
)
def test_markdown_title_is_its_first_heading(tmp_path: Path, content: str, title: str) -> None:
    assert title_of(tmp_path / "doc.md", content) == title


def test_html_title_is_its_first_heading(tmp_path: Path) -> None:
    html = "<html><head><title>Site</title></head><body><p>Menu</p><h2>Pricing  plans</h2>"
    assert title_of(tmp_path / "p.html", html + "<p>Cheap.</p></body></html>") == "Pricing plans"


def test_docx_title_is_its_first_heading(tmp_path: Path) -> None:
    body = _paragraph("Preface text.") + _paragraph("Install", "Titre1") + _paragraph("Run.")
    assert document_title(parse_file(make_docx(tmp_path / "m.docx", body))) == "Install"


def test_code_title_is_its_file_name(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    assert title_of(tmp_path / "pkg" / "retry.py", "import time\n") == "retry.py"


@pytest.mark.parametrize(
    ("metadata", "title"),
    [
        ("Wing  Flutter Study", "Wing Flutter Study"),
        (None, "Annual report 2024"),
        ("", "Annual report 2024"),
        ("Microsoft Word - draft3.docx", "Annual report 2024"),
        ("untitled", "Annual report 2024"),
        ("report_final.pdf", "Annual report 2024"),
        ("1234", "Annual report 2024"),
    ],
)
def test_pdf_title_is_its_metadata_title_when_sensible(
    tmp_path: Path, metadata: str | None, title: str
) -> None:
    path = pdf_with_title(tmp_path / "r.pdf", ["", "Annual report 2024\nRevenue grew."], metadata)
    assert document_title(parse_file(path)) == title


def test_a_document_without_text_has_no_title() -> None:
    empty = ParsedDocument(path="e.txt", type="text", sections=[Section(text=" \n\n")])
    assert document_title(empty) is None
    assert embed_body(None, "chunk") == "chunk"


def test_embed_body_puts_the_title_above_the_chunk_once() -> None:
    assert embed_body("Wing flutter", "the results show") == "Wing flutter\n\nthe results show"
    first = "Wing flutter\n\nthe results"
    assert embed_body("Wing flutter", first) == first
    assert embed_body("Install guide", "# Install  guide\n\nSteps.") == "# Install  guide\n\nSteps."
    assert embed_body("Install guide", "\n  Install guide\nSteps.") == "\n  Install guide\nSteps."
    # The title elsewhere than the first line does not count.
    assert embed_body("Steps", "Intro.\nSteps") == "Steps\n\nIntro.\nSteps"
