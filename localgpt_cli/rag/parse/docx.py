"""DOCX -> text sections from word/document.xml, with the stdlib only.

A .docx is a zip of XML; its text is the `w:t` runs of `w:p` paragraphs, and its
structure is the paragraph styles (Heading 1, Heading 2, ...). That is all retrieval
needs, so no python-docx dependency. The XML is streamed with iterparse and each
paragraph freed once read, so a large document never sits in memory as a tree.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path
from xml.etree import ElementTree as ET

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.parse.headings import DraftSection, HeadingTrail, finish_sections
from localgpt_cli.rag.types import ParsedDocument

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
DOCUMENT_XML = "word/document.xml"
STYLES_XML = "word/styles.xml"
# Style names are stable ("heading 1") where style ids are localised ("berschrift1").
HEADING_NAME = re.compile(r"heading\s*(\d)$", re.I)
# Compressed XML is small; a document.xml that inflates past this many times the file
# size limit is a zip bomb, not a document.
INFLATE_FACTOR = 10
RUN_TEXT = {f"{W}t": None, f"{W}tab": "\t", f"{W}br": "\n", f"{W}cr": "\n",
            f"{W}noBreakHyphen": "-"}  # fmt: skip


def parse_docx(path: Path, *, max_bytes: int) -> ParsedDocument:
    """Read a .docx: paragraphs become lines, heading-styled paragraphs start sections."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise InvalidInput(
            f"{path}: not a valid DOCX ({exc}; corrupt, or password-protected by Word)"
        ) from exc
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read ({exc.strerror or exc})") from exc
    with archive:
        try:
            info = archive.getinfo(DOCUMENT_XML)
        except KeyError:
            raise InvalidInput(f"{path}: not a Word document (no {DOCUMENT_XML})") from None
        if info.file_size > INFLATE_FACTOR * max_bytes:
            raise InvalidInput(
                f"{path}: {DOCUMENT_XML} inflates to {info.file_size} bytes; refusing",
                code="too_large",
            )
        try:
            levels = _heading_levels(archive)
            drafts = _read_paragraphs(archive, levels)
        except (ET.ParseError, zipfile.BadZipFile, zlib.error, EOFError, RuntimeError) as exc:
            raise InvalidInput(f"{path}: corrupt DOCX ({exc})") from exc
    return ParsedDocument(path=str(path), type="docx", sections=finish_sections(drafts))


def _heading_levels(archive: zipfile.ZipFile) -> dict[str, int]:
    """Style id -> heading level (Title = 0, Heading N = N) from word/styles.xml."""
    levels: dict[str, int] = {}
    if STYLES_XML not in archive.namelist():
        return levels
    with archive.open(STYLES_XML) as fh:
        root = ET.parse(fh).getroot()
    for style in root.iter(f"{W}style"):
        style_id = style.get(f"{W}styleId")
        name_el = style.find(f"{W}name")
        name = name_el.get(f"{W}val", "") if name_el is not None else ""
        outline = style.find(f"{W}pPr/{W}outlineLvl")
        match = HEADING_NAME.match(name)
        if style_id is None:
            continue
        if match:
            levels[style_id] = int(match[1])
        elif name.lower() == "title":
            levels[style_id] = 0
        elif outline is not None and (level := _outline_level(outline)) is not None:
            levels[style_id] = level
    return levels


def _outline_level(outline: ET.Element) -> int | None:
    """w:outlineLvl 0..8 are heading levels 1..9; 9 means body text."""
    value = outline.get(f"{W}val", "")
    return int(value) + 1 if value.isdigit() and int(value) < 9 else None


def _style_level(paragraph: ET.Element, levels: dict[str, int]) -> int | None:
    """The heading level of a paragraph, or None for body text."""
    props = paragraph.find(f"{W}pPr")
    if props is None:
        return None
    outline = props.find(f"{W}outlineLvl")
    if outline is not None:
        return _outline_level(outline)
    style = props.find(f"{W}pStyle")
    style_id = style.get(f"{W}val", "") if style is not None else ""
    if style_id in levels:
        return levels[style_id]
    match = HEADING_NAME.match(style_id)  # no styles.xml: ids are "Heading1" in English Word
    if match:
        return int(match[1])
    return 0 if style_id.lower() == "title" else None


def _paragraph_text(paragraph: ET.Element) -> str:
    parts: list[str] = []
    for el in paragraph.iter():
        if el.tag in RUN_TEXT:
            fixed = RUN_TEXT[el.tag]
            parts.append(fixed if fixed is not None else el.text or "")
    return "".join(parts)


def _read_paragraphs(archive: zipfile.ZipFile, levels: dict[str, int]) -> list[DraftSection]:
    trail = HeadingTrail()
    drafts = [DraftSection(None)]
    with archive.open(DOCUMENT_XML) as fh:
        for _, el in ET.iterparse(fh, events=("end",)):
            if el.tag != f"{W}p":
                continue
            text = _paragraph_text(el).rstrip()
            level = _style_level(el, levels)
            # Clearing frees the paragraph, and keeps a text box's paragraphs (nested in
            # an outer paragraph) from being read twice.
            el.clear()
            if level is not None and text.strip():
                drafts.append(DraftSection(trail.enter(level, text), lines=[text], heading_lines=1))
            elif text.strip() or drafts[-1].lines:
                drafts[-1].lines.append(text)
    return drafts
