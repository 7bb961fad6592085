"""Tables for people: rich on a terminal, tab-separated plain text in a pipe.

Plain output is TSV (no padding, no ANSI) so that `cut -f1` and `awk -F'\t'` work on it
when someone forgets --json.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from localgpt_cli.render.output import Output

# What makes a path unsafe to print bare, as git decides it with core.quotePath=false:
# control characters (a tab or newline would split a TSV record), the quote and the
# backslash themselves, plus C1 controls and the bytes of a name that is not UTF-8 (kept
# by Python as lone surrogates, U+DC80-U+DCFF).
_UNSAFE = re.compile(r'[\x00-\x1f\x7f-\x9f"\\\udc80-\udcff]')
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v",
            "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}  # fmt: skip


def local_time(stamp: str) -> str:
    """An ISO UTC stamp as local wall-clock time to the minute, for people."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def when(output: Output, stamp: str | None) -> str:
    """A time in a table, one way for every command: local time to the minute on a
    terminal, the stored ISO UTC stamp in a pipe (what a script can parse)."""
    if not stamp:
        return ""
    return local_time(stamp) if output.pretty else stamp


def chunks(n: int) -> str:
    """`1 chunk`, `2 chunks`: a count as a sentence says it."""
    return f"{n:,} chunk" + ("" if n == 1 else "s")


def quote_path(path: str) -> str:
    """A path as text output prints it: bare when safe, else C-quoted as git does
    (`"dir/a\\tb.txt"`: in double quotes, backslash escapes, octal for other bytes).

    Plain output is one record per line with tab-separated fields, so a name holding a
    tab or a newline must not print them raw; quoting (rather than replacing) keeps the
    name recoverable. NDJSON carries the path unchanged.
    """
    if not _UNSAFE.search(path):
        return path
    return '"' + _UNSAFE.sub(_escape, path) + '"'


def display_path(path: str) -> str:
    """A stored (absolute) path as a person wants to read it: relative to the current
    folder when inside it, `~/...` when inside the home folder; C-quoted as git does
    when the name holds a tab, a newline or another unsafe character (text output only,
    NDJSON keeps the path as stored)."""
    import os

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    if cwd and path.startswith(cwd.rstrip(os.sep) + os.sep):
        return quote_path(path[len(cwd.rstrip(os.sep)) + 1 :])
    home = os.path.expanduser("~")
    if home not in ("", "/") and path.startswith(home + os.sep):
        return quote_path("~" + path[len(home) :])
    return quote_path(path)


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    raw = bytes([code - 0xDC00]) if code >= 0xDC80 else ch.encode()
    return "".join(f"\\{byte:03o}" for byte in raw)


def human_size(n: int | None) -> str:
    if not n:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def print_table(
    output: Output,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    empty: str | None = None,
    header: bool = True,
    title: str | None = None,
) -> None:
    if not rows:
        if empty:
            output.stderr.write(f"{empty}\n")
        return
    if output.pretty:
        from rich.table import Table

        table = Table(
            show_header=header, header_style="bold", box=None, pad_edge=False, title=title
        )
        for h in headers:
            # words wrap whole; one too long for its column (a path) is cut with an ellipsis,
            # never split across lines mid-word
            table.add_column(h, overflow="ellipsis")
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        output.console().print(table)
        return
    lines = []
    if header:
        lines.append("\t".join(headers))
    for row in rows:
        lines.append("\t".join("" if v is None else str(v).replace("\t", " ") for v in row))
    output.stdout.write("\n".join(lines) + "\n")
    output.stdout.flush()
