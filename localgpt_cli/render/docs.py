"""One stored document's chunks for people (`docs show`): rich on a terminal, plain in a pipe.

Each chunk is shown whole, in order, under a line saying where it came from (page,
lines, heading), so a person can check how a document was cut before searching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from localgpt_cli.render.tables import chunks as count_chunks
from localgpt_cli.render.tables import display_path

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


def print_chunks(output: Output, doc_id: str, path: str, chunks: Sequence[Any]) -> None:
    """The chunks under a header (a terminal) or each after a `--- chunk N` line (a pipe)."""
    if output.pretty:
        from rich.markup import escape  # a path or heading may hold `[...]`

        console = output.console()
        header = f"[bold]{escape(display_path(path))}[/]  {doc_id}  {count_chunks(len(chunks))}"
        console.print(header)
        for c in chunks:
            console.print(f"\n[cyan]chunk {c.ordinal}[/]  [dim]{escape(_where(c))}[/]")
            console.print(c.text, markup=False, highlight=False)
        return
    for c in chunks:
        output.stdout.write(f"--- chunk {c.ordinal}  {_where(c)}\n{c.text}\n")
    output.stdout.flush()


def _where(chunk: Any) -> str:
    parts = []
    if chunk.page is not None:
        parts.append(f"page {chunk.page}")
    if chunk.line_start is not None:
        parts.append(f"lines {chunk.line_start}-{chunk.line_end}")
    if chunk.heading:
        parts.append(chunk.heading)
    return "  ".join(parts)
