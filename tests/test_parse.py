"""parse_file on real files of every supported kind, and the ways a file can be refused."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import pytest

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.filetypes import detect_type, is_binary
from localgpt_cli.rag.parse import parse_file
from tests.pdfgen import make_pdf, pdf_bytes

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


# -- detect_type / is_binary -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("app.py", ("code", "py")),
        ("lib.mjs", ("code", "js")),
        ("view.tsx", ("code", "tsx")),
        ("main.rs", ("code", "rs")),
        ("util.hpp", ("code", "cpp")),
        ("deploy.yml", ("code", "yaml")),
        ("run.zsh", ("code", "sh")),
        ("Component.vue", ("code", "vue")),
        ("Dockerfile", ("code", "dockerfile")),
        ("Dockerfile.prod", ("code", "dockerfile")),
        ("Makefile", ("code", "make")),
        ("README.md", ("markdown", None)),
        ("page.mdx", ("markdown", None)),
        ("index.HTML", ("html", None)),
        ("notes.txt", ("text", None)),
        ("server.log", ("text", None)),
        ("TODO", ("text", None)),
        ("notes.weird", ("text", None)),
        ("paper.pdf", ("pdf", None)),
        ("report.docx", ("docx", None)),
        ("photo.PNG", ("image", None)),  # read by OCR (rag/parse/image.py)
        ("anim.gif", None),
        ("archive.tar.gz", None),
        ("model.gguf", None),
    ],
)
def test_detect_type_by_name(name: str, expected: tuple[str, str | None] | None) -> None:
    assert detect_type(Path(name)) == expected


def test_is_binary_sniffs_content_and_knows_containers(tmp_path: Path) -> None:
    blob = tmp_path / "data.weird"
    blob.write_bytes(b"header\x00\x01\x02 more")
    text = tmp_path / "plain.weird"
    text.write_text("just words\n")
    wide = tmp_path / "wide.txt"
    wide.write_bytes("hello wide world".encode("utf-16"))
    image = tmp_path / "fake.gif"
    image.write_text("not really an image")
    scan = tmp_path / "scan.png"
    scan.write_text("not read here")
    pdf = make_pdf(tmp_path / "doc.pdf", ["text"])
    assert is_binary(blob)
    assert not is_binary(text)
    assert not is_binary(wide)  # NUL bytes, but a UTF-16 BOM: text
    assert is_binary(image)  # known binary extension, not read at all
    assert not is_binary(pdf)  # binary bytes, but a format we parse
    assert not is_binary(scan)  # an image OCR reads: the parser decides, by --ocr


def test_binary_file_is_refused_with_its_own_code(tmp_path: Path) -> None:
    blob = tmp_path / "data.bin2"
    blob.write_bytes(b"\x7fELF\x00\x00\x00" * 10)
    with pytest.raises(InvalidInput) as err:
        parse_file(blob)
    assert err.value.code == "binary_file"
    assert str(blob) in str(err.value)


# -- text and encodings ----------------------------------------------------------------


def test_text_file_is_one_section_from_line_one(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("first line\r\nsecond line\r\n")
    doc = parse_file(path)
    assert doc.type == "text"
    assert doc.warnings == []
    assert [(s.text, s.line_start) for s in doc.sections] == [("first line\nsecond line\n", 1)]


def test_empty_file_has_no_sections(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("  \n\n")
    assert parse_file(path).sections == []


def test_cp1252_text_is_decoded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "old.txt"
    path.write_bytes("café “quoted” — naïve".encode("cp1252"))
    doc = parse_file(path)
    assert doc.sections[0].text == "café “quoted” — naïve"
    assert doc.warnings == ["not valid UTF-8; decoded as cp1252"]


def test_bytes_cp1252_cannot_decode_fall_back_to_latin1(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("Grüße".encode("latin-1") + b" \x81\x8d")
    doc = parse_file(path)
    assert doc.sections[0].text == "Grüße \x81\x8d"
    assert doc.warnings == ["not valid UTF-8; decoded as latin-1"]


def test_utf16_with_bom_is_decoded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "notepad.txt"
    path.write_bytes("Ünïcode line\r\nline two\r\n".encode("utf-16"))
    doc = parse_file(path)
    assert doc.sections[0].text == "Ünïcode line\nline two\n"
    assert doc.warnings == ["decoded as utf-16 (byte-order mark)"]


def test_utf8_bom_is_silent(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes(b"\xef\xbb\xbf# Title\nbody\n")
    doc = parse_file(path)
    assert doc.warnings == []
    assert doc.sections[0].heading == "Title"


def test_too_large_names_the_limit_and_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"word " * 5_000)  # 25,000 bytes
    with pytest.raises(InvalidInput) as err:
        parse_file(path, max_bytes=20_000)
    assert err.value.code == "too_large"
    assert "--max-file-size" in str(err.value)
    big = tmp_path / "huge.log"
    with open(big, "wb") as fh:
        fh.truncate(25_300_000)  # sparse: no 25 MB write
    with pytest.raises(InvalidInput) as err:
        parse_file(big)
    assert str(err.value) == (
        f"{big}: too large (25.3 MB > 20 MB limit; raise with --max-file-size)"
    )


def test_missing_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_file(tmp_path / "gone.txt")
    assert "gone.txt" in str(err.value)


# -- markdown --------------------------------------------------------------------------

MARKDOWN = """\
---
title: Guide
tags: [a]
---
Intro before any heading.

# Install

## Linux

Run the installer.

```sh
# this is a shell comment, not a heading
make install
```

## Mac
Use brew.

# Usage
Start it.

Settings
--------
Edit the file.
"""


def test_markdown_sections_follow_heading_paths(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN)
    doc = parse_file(path)
    assert doc.type == "markdown"
    assert [s.heading for s in doc.sections] == [
        None,
        "Install > Linux",  # the bare "# Install" lives on in its children's paths
        "Install > Mac",
        "Usage",
        "Usage > Settings",
    ]
    assert "title: Guide" not in "".join(s.text for s in doc.sections)
    linux = doc.sections[1]
    assert "# this is a shell comment, not a heading" in linux.text
    assert "make install" in linux.text


def test_markdown_line_starts_point_at_the_source(tmp_path: Path) -> None:
    path = tmp_path / "guide.mdx"
    path.write_text(MARKDOWN)
    lines = MARKDOWN.split("\n")
    for section in parse_file(path).sections:
        assert section.line_start is not None
        first = section.text.split("\n")[0]
        assert lines[section.line_start - 1] == first


def test_unclosed_front_matter_is_kept_as_text(tmp_path: Path) -> None:
    path = tmp_path / "rule.md"
    path.write_text("---\nnot front matter\n\n# Real\nbody\n")
    doc = parse_file(path)
    assert "not front matter" in doc.sections[0].text
    assert doc.sections[-1].heading == "Real"


# -- code ------------------------------------------------------------------------------


def test_code_is_one_section_with_its_language(tmp_path: Path) -> None:
    path = tmp_path / "tool.py"
    source = "import os\n\n\ndef main():\n    return os.getcwd()\n"
    path.write_text(source)
    doc = parse_file(path)
    assert (doc.type, doc.language) == ("code", "py")
    assert [(s.text, s.line_start) for s in doc.sections] == [(source, 1)]


# -- HTML ------------------------------------------------------------------------------

HTML = """<!doctype html>
<html><head><title>Page title</title><style>p { color: red }</style>
<script>var hidden = "<h1>not a heading</h1>";</script></head>
<body>
<nav>Home</nav>
<h1>User guide</h1>
<p>Hello &amp; <b>welcome</b>
   to   the page.</p>
<ul><li>first item</li><li>second item</li></ul>
<h2>Setup</h2><p>Do the setup.</p>
<script>trackEverything();</script>
<table><tr><td>key</td><td>value</td></tr></table>
<h1>Other</h1><p>Last<br>line</p>
</body></html>
"""


def test_html_keeps_visible_text_structure_and_headings(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(HTML)
    doc = parse_file(path)
    assert doc.type == "html"
    text = "\n".join(s.text for s in doc.sections)
    for noise in ("Page title", "color: red", "hidden", "trackEverything", "not a heading"):
        assert noise not in text
    assert [s.heading for s in doc.sections] == [None, "User guide", "User guide > Setup", "Other"]
    guide = doc.sections[1].text
    assert "Hello & welcome to the page." in guide
    assert "first item\nsecond item" in guide
    assert doc.sections[2].text == "Setup\n\nDo the setup.\n\nkey\tvalue"
    assert doc.sections[3].text == "Other\n\nLast\nline"


def test_html_heading_left_open_ends_at_the_next_block(tmp_path: Path) -> None:
    path = tmp_path / "sloppy.html"
    path.write_text("<h2>Open heading<p>Body text.</p><h3>Sub</h3>More.")
    doc = parse_file(path)
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Open heading", "Open heading\n\nBody text."),
        ("Open heading > Sub", "Sub\n\nMore."),
    ]


def test_html_meta_charset_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "old.htm"
    path.write_bytes(
        '<html><head><meta charset="iso-8859-7"></head><body><p>Καλημέρα</p></body></html>'.encode(
            "iso-8859-7"
        )
    )
    doc = parse_file(path)
    assert doc.sections[0].text == "Καλημέρα"
    assert doc.warnings == ["not valid UTF-8; decoded as iso-8859-7"]


# -- DOCX ------------------------------------------------------------------------------


def _paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{props}<w:r><w:t>{text}</w:t></w:r></w:p>"


def make_docx(path: Path, body: str, *, styles: bool = True) -> Path:
    """A minimal .docx: content types, document.xml and (optionally) styles.xml."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/'
            '2006/content-types"><Override PartName="/word/document.xml" ContentType="'
            'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"'
            "/></Types>",
        )
        zf.writestr(
            "word/document.xml",
            f'<?xml version="1.0"?><w:document xmlns:w="{W_NS}"><w:body>{body}</w:body>'
            "</w:document>",
        )
        if styles:
            zf.writestr(
                "word/styles.xml",
                f'<?xml version="1.0"?><w:styles xmlns:w="{W_NS}">'
                '<w:style w:styleId="Titre1"><w:name w:val="heading 1"/></w:style>'
                '<w:style w:styleId="Titre2"><w:name w:val="heading 2"/></w:style>'
                "</w:styles>",
            )
    return path


def test_docx_paragraphs_and_heading_styles(tmp_path: Path) -> None:
    body = (
        _paragraph("Preface text.")
        + _paragraph("Install", "Titre1")  # a localised style id, named "heading 1"
        + _paragraph("Linux", "Titre2")
        + _paragraph("Run the installer.")
        + '<w:p><w:r><w:t xml:space="preserve">Tab</w:t><w:tab/><w:t>after</w:t></w:r></w:p>'
        + "<w:tbl><w:tr><w:tc>"
        + _paragraph("cell one")
        + "</w:tc><w:tc>"
        + _paragraph("cell two")
        + "</w:tc></w:tr></w:tbl>"
        + _paragraph("Usage", "Titre1")
        + _paragraph("Start it.")
    )
    doc = parse_file(make_docx(tmp_path / "manual.docx", body))
    assert doc.type == "docx"
    assert [(s.heading, s.text) for s in doc.sections] == [
        (None, "Preface text."),
        ("Install > Linux", "Linux\nRun the installer.\nTab\tafter\ncell one\ncell two"),
        ("Usage", "Usage\nStart it."),
    ]


def test_docx_outline_levels_mark_headings(tmp_path: Path) -> None:
    outline = '<w:p><w:pPr><w:outlineLvl w:val="{}"/></w:pPr><w:r><w:t>{}</w:t></w:r></w:p>'
    body = (
        outline.format(0, "Part") + outline.format(9, "Body text.") + outline.format(1, "Chapter")
    )
    doc = parse_file(make_docx(tmp_path / "outline.docx", body + _paragraph("Words.")))
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Part", "Part\nBody text."),
        ("Part > Chapter", "Chapter\nWords."),
    ]


def test_docx_without_styles_part_uses_english_style_ids(tmp_path: Path) -> None:
    body = _paragraph("Chapter", "Heading1") + _paragraph("Words.")
    doc = parse_file(make_docx(tmp_path / "plain.docx", body, styles=False))
    assert [(s.heading, s.text) for s in doc.sections] == [("Chapter", "Chapter\nWords.")]


def test_corrupt_docx_fails_alone_with_a_reason(tmp_path: Path) -> None:
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(InvalidInput) as err:
        parse_file(broken)
    assert str(err.value).startswith(f"{broken}: not a valid DOCX")
    not_word = tmp_path / "other.docx"
    with zipfile.ZipFile(not_word, "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(InvalidInput, match="no word/document.xml"):
        parse_file(not_word)
    bad_xml = make_docx(tmp_path / "badxml.docx", "<w:p><w:r><w:t>unclosed")
    with pytest.raises(InvalidInput, match="corrupt DOCX"):
        parse_file(bad_xml)


# -- PDF -------------------------------------------------------------------------------


def test_pdf_pages_keep_their_numbers(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "paper.pdf",
        ["Hello page one\nwith (parentheses) and café", "", "The third page"],
    )
    doc = parse_file(path)
    assert doc.type == "pdf"
    assert [(s.page, s.text) for s in doc.sections] == [
        (1, "Hello page one\nwith (parentheses) and café"),
        (3, "The third page"),  # the blank page 2 has no section
    ]
    assert doc.warnings == []


def test_scanned_pdf_reports_no_text(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "scan.pdf", ["", ""])
    with pytest.raises(InvalidInput) as err:
        parse_file(path)
    assert err.value.code == "no_text"
    assert str(err.value) == (
        f"{path}: no extractable text in 2 page(s) (probably scanned; OCR it first,"
        " e.g. with ocrmypdf)"
    )


def test_encrypted_pdf_needs_a_password(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "locked.pdf", ["secret"], encrypt_password="hunter2")
    with pytest.raises(InvalidInput) as err:
        parse_file(path)
    assert err.value.code == "encrypted"
    assert str(path) in str(err.value)


def test_pdf_with_only_an_owner_password_opens(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "restricted.pdf", ["printable text"], encrypt_password="", owner_password="o"
    )
    assert [s.text for s in parse_file(path).sections] == ["printable text"]


@pytest.mark.parametrize(
    "data",
    [
        pdf_bytes(["Some text on a page"])[:150],  # truncated mid-file
        b"%PDF-1.7\n" + b"\x00garbage" * 40,
        b"not a pdf at all",
    ],
    ids=["truncated", "garbage", "no-header"],
)
def test_corrupt_pdf_fails_quietly_with_a_reason(
    tmp_path: Path,
    data: bytes,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(data)
    with caplog.at_level(logging.DEBUG), pytest.raises(InvalidInput) as err:
        parse_file(path)
    assert str(err.value).startswith(f"{path}: corrupt PDF (")
    assert err.value.code == "invalid_input"
    assert capsys.readouterr().err == ""
    assert [r for r in caplog.records if r.name.startswith("pypdf")] == []


def test_repairable_pdf_is_read_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = pdf_bytes(["Recovered text", "Page two"])
    xref_at = data.rindex(b"startxref\n") + len(b"startxref\n")
    path = tmp_path / "damaged.pdf"
    path.write_bytes(data[:xref_at] + b"999\n%%EOF\n")  # wrong xref offset
    doc = parse_file(path)
    assert [(s.page, s.text) for s in doc.sections] == [(1, "Recovered text"), (2, "Page two")]
    assert len(doc.warnings) == 1
    assert doc.warnings[0].startswith("damaged PDF, read with repairs (")
    assert capsys.readouterr().err == ""
