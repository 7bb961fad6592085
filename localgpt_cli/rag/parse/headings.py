"""Heading paths ("Install > Linux") and section drafts, shared by the structured parsers.

Markdown, HTML and DOCX all cut a document at its headings and label each piece with
the path of headings above it; this module holds the two rules they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from localgpt_cli.rag.types import Section

HEADING_SEPARATOR = " > "


class HeadingTrail:
    """The stack of open headings; a heading closes every heading at its level or deeper."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str | None:
        """Open a heading of `level` (1 = top) and return the path it starts."""
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        title = " ".join(title.split())
        if title:
            self._stack.append((level, title))
        return self.path

    @property
    def path(self) -> str | None:
        return HEADING_SEPARATOR.join(t for _, t in self._stack) or None


@dataclass
class DraftSection:
    """A section being collected: heading path, lines, and how many lines are the heading."""

    heading: str | None
    line_start: int | None = None
    lines: list[str] = field(default_factory=list)
    heading_lines: int = 0

    def has_body(self) -> bool:
        return any(line.strip() for line in self.lines[self.heading_lines :])


def finish_sections(drafts: list[DraftSection]) -> list[Section]:
    """Drafts -> Sections, dropping empty ones and heading-only parents.

    "# Install" directly followed by "## Linux" would otherwise become a chunk that says
    nothing but "# Install"; the child's heading path "Install > Linux" keeps the word.
    """
    sections: list[Section] = []
    for n, draft in enumerate(drafts):
        if not draft.has_body():
            nxt = drafts[n + 1] if n + 1 < len(drafts) else None
            is_parent = (
                draft.heading is not None
                and nxt is not None
                and (nxt.heading or "").startswith(draft.heading + HEADING_SEPARATOR)
            )
            if is_parent or not any(line.strip() for line in draft.lines):
                continue
        sections.append(
            Section(text="\n".join(draft.lines), heading=draft.heading, line_start=draft.line_start)
        )
    return sections
