"""Text bound for a terminal: control characters shown, never obeyed.

A model's answer, a file's name, a stored conversation or a memory fact can hold escape
sequences (`ESC ] 0 ; title BEL` retitles the terminal, `ESC [ 31 m` colours it, others
rewrite the screen or, on some terminals, answer back as typed input). Whatever
localgpt writes to a terminal passes through `visible`, which shows each C0 and C1
control character the way `less` and `cat -v` do: `^[` for ESC, `^G` for BEL, `^M` for
a carriage return, `^?` for DEL, `<U+009B>` for a C1 character; a tab and a newline
stay as they are. It works character by character, so a sequence split across streamed
tokens is shown as surely as a whole one.

One place does it for every writer: `Output` wraps its streams in `TerminalStream` when
they are terminals (plain writes), and its rich consoles are `safe_console`s, which
show the control characters of the text they draw while keeping their own styling.
A pipe gets the bytes unchanged (a script asked for them), and NDJSON keeps the exact
text, JSON-escaped (render/ndjson.py).
"""

from __future__ import annotations

import functools
import re
from typing import IO, Any

# C0 but tab and newline, DEL, C1
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every control character but tab and newline made visible."""
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class TerminalStream:
    """A text stream on a terminal whose writes pass through `visible`; everything else
    (flush, fileno, isatty, the binary `buffer` that NDJSON is written to) is the
    stream's own."""

    def __init__(self, stream: IO[str]) -> None:
        self.unguarded = stream

    def write(self, text: str) -> int:
        return self.unguarded.write(visible(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unguarded, name)


def guard(stream: IO[str]) -> IO[str]:
    """The stream itself when it is not a terminal (a pipe keeps the bytes), else a
    TerminalStream over it."""
    if isinstance(stream, TerminalStream) or not isatty(stream):
        return stream
    return TerminalStream(stream)  # type: ignore[return-value]


def unguarded(stream: Any) -> Any:
    """The stream under a TerminalStream (rich writes its own escape codes to it)."""
    return stream.unguarded if isinstance(stream, TerminalStream) else stream


@functools.cache
def _console_class() -> type:
    """rich's Console, drawing the text of what it renders through `visible` when it
    draws on a terminal: its own styles and cursor moves (control segments) are kept.
    Built on first use, so that `--help` does not import rich."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render_str(self, text: str, **options: Any) -> Any:
            # Made visible before layout too, so that a table or a wrapped line measures
            # `^[` as the two cells it takes (the buffer below catches everything else).
            return super().render_str(visible(text) if self.is_terminal else text, **options)

        def _render_buffer(self, buffer: Any) -> str:
            if not self.is_terminal:  # a pipe keeps the bytes
                return super()._render_buffer(buffer)
            return super()._render_buffer(
                segment if segment.control else Segment(visible(segment.text), segment.style)
                for segment in buffer
            )

    return SafeConsole


def safe_console(**options: Any) -> Any:
    """A rich Console (same options) whose rendered text shows control characters."""
    return _console_class()(**options)
