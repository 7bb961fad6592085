"""Tables for people: rich on a terminal, tab-separated plain text in a pipe.

Plain output is TSV (no padding, no ANSI) so that `cut -f1` and `awk -F'\t'` work on it
when someone forgets --json.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localgpt_cli.render.output import Output


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
            table.add_column(h, overflow="fold")
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
