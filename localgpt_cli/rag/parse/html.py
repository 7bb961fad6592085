"""HTML -> text sections with the stdlib parser: what a reader sees, cut at headings.

Saved web pages are mostly noise (scripts, styles, head metadata); retrieval wants the
readable text with its block structure (paragraphs as blank lines, list items and
table rows as lines) so that chunking can cut between blocks, and headings as heading
paths. Line numbers are not kept: the text no longer matches the source lines.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from localgpt_cli.rag.decode import decode_text
from localgpt_cli.rag.parse.headings import DraftSection, HeadingTrail, finish_sections
from localgpt_cli.rag.types import ParsedDocument

# Elements whose content is never text for a reader.
SKIPPED = frozenset(
    {"script", "style", "head", "title", "noscript", "template", "svg", "math", "iframe",
     "object", "canvas", "select"}
)  # fmt: skip
# Elements that end a paragraph (a blank line) and those that end a line.
PARAGRAPH_BREAKS = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "aside", "nav",
     "blockquote", "pre", "table", "ul", "ol", "dl", "figure", "form", "fieldset",
     "address", "details", "hr", "body", "center"}
)  # fmt: skip
LINE_BREAKS = frozenset({"br", "li", "tr", "dt", "dd", "figcaption", "caption", "summary"})
CELLS = frozenset({"td", "th"})
HEADINGS = {f"h{n}": n for n in range(1, 7)}
META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
WHITESPACE = re.compile(r"\s+")


class _Extractor(HTMLParser):
    """Collects visible text into DraftSections, one per heading."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.trail = HeadingTrail()
        self.drafts = [DraftSection(None)]
        self._parts: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._pending_newlines = 0
        self._heading_level: int | None = None
        self._heading_text: list[str] = []

    # -- structure -----------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._skip_depth = 0  # a <head> left open ends where the body starts
        if tag in SKIPPED:
            self._skip_depth += 1
            return
        if self._skip_depth:
            return
        if self._heading_level is not None and (tag in PARAGRAPH_BREAKS or tag in HEADINGS):
            self.handle_endtag(f"h{self._heading_level}")  # a heading left open ends here
        if tag in HEADINGS:
            self._start_section()
            self._heading_level = HEADINGS[tag]
            self._heading_text = []
        elif tag in PARAGRAPH_BREAKS:
            self._break(2)
        elif tag in LINE_BREAKS:
            self._break(1)
        elif tag in CELLS and self._parts and not self._pending_newlines:
            self._parts.append("\t")
        if tag == "pre":
            self._pre_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if self._skip_depth:
            return
        if tag in HEADINGS and self._heading_level is not None:
            self.drafts[-1].heading = self.trail.enter(
                self._heading_level, "".join(self._heading_text)
            )
            self._heading_level = None
            self._break(2)
            self._finish_heading_lines()
        elif tag in PARAGRAPH_BREAKS:
            self._break(2)
        elif tag in LINE_BREAKS and tag != "br":
            self._break(1)
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if not self._pre_depth:
            data = WHITESPACE.sub(" ", data)
        if self._heading_level is not None:
            self._heading_text.append(data)
        if self._pending_newlines:
            if not data.strip():
                return
            self._parts.append("\n" * self._pending_newlines)
            self._pending_newlines = 0
            data = data if self._pre_depth else data.lstrip()
        elif not self._parts or self._parts[-1].endswith("\n"):
            data = data if self._pre_depth else data.lstrip()
        if data:
            self._parts.append(data)

    # -- sections --------------------------------------------------------------------
    def _break(self, newlines: int) -> None:
        if self._parts:
            self._pending_newlines = max(self._pending_newlines, newlines)

    def _start_section(self) -> None:
        self._flush()
        self.drafts.append(DraftSection(self.trail.path))

    def _finish_heading_lines(self) -> None:
        """The heading's own text is the first lines of its section, not its body."""
        draft = self.drafts[-1]
        draft.heading_lines = "".join(self._parts).strip().count("\n") + 1

    def _flush(self) -> None:
        text = "".join(self._parts)
        self.drafts[-1].lines = [line.rstrip() for line in text.strip().split("\n")]
        self._parts = []
        self._pending_newlines = 0

    def close(self) -> None:
        super().close()
        self._flush()


def parse_html(path: Path, data: bytes) -> ParsedDocument:
    """HTML bytes -> ParsedDocument; a meta charset is honoured if the bytes are not UTF-8."""
    declared = META_CHARSET.search(data[:4096])
    text, warning = decode_text(data, declared[1].decode("ascii") if declared else None)
    extractor = _Extractor()
    extractor.feed(text)
    extractor.close()
    return ParsedDocument(
        path=str(path),
        type="html",
        sections=finish_sections(extractor.drafts),
        warnings=[warning] if warning else [],
    )
