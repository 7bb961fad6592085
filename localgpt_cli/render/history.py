"""Stored conversations for people: the list, search hits, and what rm, prune and export did.

A terminal gets ids cut to their shortest unique prefix, local wall-clock times and
highlighted matches; a pipe gets full ids, stored UTC stamps and tab-separated rows;
--json gets one record each, unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.render.tables import local_time

if TYPE_CHECKING:
    from localgpt_cli.history.types import ConversationSummary, SearchHit
    from localgpt_cli.render.output import Output

# Private-use characters as snippet markers: they practically never occur in stored
# text, and are replaced by a style before anything is drawn.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"


def title(text: str | None) -> str:
    """A conversation's title, or `(untitled)` for one that has none yet."""
    return text if text else "(untitled)"


def print_conversations(
    output: Output, found: Sequence[ConversationSummary], short: Mapping[str, str]
) -> None:
    """`history list`: records with --json, else a table (`short` ids on a terminal)."""
    if output.json:
        for c in found:
            output.record(c.to_record())
        return
    from localgpt_cli.render.tables import print_table

    headers = ["ID", "TITLE", "MODEL", "MESSAGES", "UPDATED"]
    if output.pretty:
        rows = [[short[c.id], title(c.title), c.model, c.messages, local_time(c.updated_at)]
                for c in found]
    else:
        rows = [[c.id, c.title or "", c.model, c.messages, c.updated_at] for c in found]
    print_table(output, headers, rows)


def hit_marks(output: Output) -> tuple[str, str] | None:
    """How search snippets mark matched words for this output: the store's own ** for
    --json (None), invisible markers a terminal turns into a style, nothing in a pipe."""
    if output.json:
        return None
    if output.pretty:
        return (_MARK_OPEN, _MARK_CLOSE)
    return ("", "")


def print_hits(output: Output, hits: Sequence[SearchHit], short: Mapping[str, str]) -> None:
    """`history search`: records with --json, highlighted snippets on a terminal, else a
    table; snippets marked as `hit_marks` asked, `short` ids on a terminal."""
    if output.json:
        for hit in hits:
            output.record(hit.to_record())
        return
    if output.pretty:
        _print_hits_pretty(output, hits, short)
        return
    from localgpt_cli.render.tables import print_table

    rows = [[h.rank, h.conversation_id, h.seq, h.role, h.title or "", " ".join(h.snippet.split())]
            for h in hits]
    print_table(output, ["RANK", "CONVERSATION", "SEQ", "ROLE", "TITLE", "SNIPPET"], rows)


def _print_hits_pretty(
    output: Output, hits: Sequence[SearchHit], short: Mapping[str, str]
) -> None:
    from rich.text import Text

    console = output.console()
    for hit in hits:
        head = Text(f"{hit.rank:>3}  ")
        head.append(short[hit.conversation_id], style="cyan")
        head.append(f"  {title(hit.title)}", style="bold")
        head.append(f"  {hit.role} #{hit.seq} · {local_time(hit.created_at)}", style="dim")
        console.print(head)
        body = Text("     ")
        body.append_text(_snippet_text(" ".join(hit.snippet.split())))
        console.print(body)


def _snippet_text(snippet: str) -> Any:
    """A marked snippet as rich Text with the matched words highlighted."""
    from rich.text import Text

    text = Text()
    for i, part in enumerate(re.split(f"[{_MARK_OPEN}{_MARK_CLOSE}]", snippet)):
        text.append(part, style="bold yellow" if i % 2 else "")
    return text


def print_doomed(output: Output, found: Sequence[ConversationSummary]) -> None:
    """The conversations about to be deleted, on stderr, before asking."""
    for c in found:
        output.stderr.write(f"  {c.id}  {title(c.title)} ({c.messages} messages)\n")


def print_removed(output: Output, found: Sequence[ConversationSummary]) -> None:
    """`history rm`: one `conversation` record (status removed) or line per deletion."""
    for c in found:
        if output.json:
            output.record({"type": "conversation", "status": "removed",
                           **{k: v for k, v in c.to_record().items() if k != "type"}})
        else:
            output.stdout.write(f"removed {c.id}  {title(c.title)} ({c.messages} messages)\n")
    output.stdout.flush()


def print_pruned(output: Output, removed: int, age: timedelta, words: str, cutoff: str) -> None:
    """`history prune`: a `summary` record, or how many went for how long unused."""
    if output.json:
        output.record({"type": "summary", "removed": removed,
                       "older_than_seconds": int(age.total_seconds()), "cutoff": cutoff})
    else:
        noun = "conversation" if removed == 1 else "conversations"
        output.stdout.write(f"removed {removed} {noun} not updated for {words}\n")
        output.stdout.flush()


def print_export(
    output: Output, conversation_id: str, fmt: str, document: str, path: Path | None, size: int
) -> None:
    """`history export`: the document on stdout (or a note when written to a file);
    with --json one `export` record, holding the document when no file was given.
    `size` is the document's length in UTF-8 bytes, as written."""
    record: dict[str, Any] = {"type": "export", "conversation_id": conversation_id,
                              "format": fmt, "path": None if path is None else str(path),
                              "bytes": size}
    if output.json:
        if path is None:
            record["content"] = document
        output.record(record)
    elif path is None:
        output.stdout.write(document)
        output.stdout.flush()
    else:
        output.info(f"Wrote {size:,} bytes to {path}.")
