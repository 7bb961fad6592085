"""Markdown/MDX -> one Section per heading, carrying the heading path and first line.

A line-based scanner, not a Markdown renderer: retrieval needs the heading structure and
exact line numbers, and the text itself is kept verbatim (markup and all) so that chunk
line ranges point at the source. Only what changes the structure is recognised: front
matter, ATX and setext headings, and fenced code blocks (whose `#` lines are code, not
headings).
"""

from __future__ import annotations

import re

from localgpt_cli.rag.parse.headings import DraftSection, HeadingTrail, finish_sections
from localgpt_cli.rag.types import Section

ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*$")
SETEXT_UNDERLINE = re.compile(r" {0,3}(={3,}|-{3,})[ \t]*$")
# A line that cannot be the text of a setext heading: list item, quote, table, HTML,
# indented code. "- item\n---" is a list and a rule, not a heading.
NOT_PARAGRAPH = re.compile(r"(?: {4}|\t| {0,3}(?:[-+*>|<]|\d+[.)])(?:[ \t]|$))")
FRONT_MATTER_FENCES = {"---": ("---", "..."), "+++": ("+++",)}
# Only lines starting with one of these can open a fence or be a heading or underline;
# checking the first character first keeps the scan cheap on long documents.
STRUCTURE_STARTS = frozenset(" #`~=-")


def markdown_sections(text: str) -> list[Section]:
    """Split Markdown into sections at headings (headings inside code fences excluded)."""
    lines = text.split("\n")
    trail = HeadingTrail()
    drafts: list[DraftSection] = []
    first = _front_matter_end(lines)
    current = DraftSection(None, first + 1)
    fence: str | None = None
    prev_is_paragraph_start = False
    for i in range(first, len(lines)):
        line = lines[i]
        if fence is not None:
            current.lines.append(line)
            closing = FENCE_CLOSE.match(line)
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= len(fence):
                fence = None
            continue
        if line[:1] not in STRUCTURE_STARTS:
            prev_is_paragraph_start = _starts_paragraph(current, line)
            current.lines.append(line)
            continue
        opening = FENCE_OPEN.match(line)
        if opening:
            fence = opening[1]
            current.lines.append(line)
            prev_is_paragraph_start = False
            continue
        heading = ATX_HEADING.match(line)
        if heading:
            drafts.append(current)
            path = trail.enter(len(heading[1]), heading[2] or "")
            current = DraftSection(path, i + 1, [line], heading_lines=1)
            prev_is_paragraph_start = False
            continue
        underline = SETEXT_UNDERLINE.match(line)
        if underline and prev_is_paragraph_start:
            title = current.lines.pop()
            drafts.append(current)
            level = 1 if underline[1][0] == "=" else 2
            current = DraftSection(trail.enter(level, title), i, [title, line], heading_lines=2)
            prev_is_paragraph_start = False
            continue
        prev_is_paragraph_start = not underline and _starts_paragraph(current, line)
        current.lines.append(line)
    drafts.append(current)
    return finish_sections(drafts)


def _starts_paragraph(current: DraftSection, line: str) -> bool:
    """True if `line` could be a setext heading's text: a one-line paragraph so far.

    That is a plain text line after a blank line, a heading, or the section start.
    """
    if not line.strip() or NOT_PARAGRAPH.match(line):
        return False
    lines = current.lines
    return not lines or not lines[-1].strip() or len(lines) == current.heading_lines


def _front_matter_end(lines: list[str]) -> int:
    """Index of the first line after YAML (---) or TOML (+++) front matter, else 0."""
    closers = FRONT_MATTER_FENCES.get(lines[0].rstrip()) if lines else None
    if not closers:
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip() in closers:
            return i + 1
    return 0
