"""`localgpt history import`, and `history export` of every conversation: moving a history
between backends (a SQLite file, a PostgreSQL server).

    localgpt history export --json | LOCALGPT_HISTORY_URL=postgresql://… localgpt history import

Ids are kept, so importing the same export twice adds nothing, and conversations that
grew since the last import gain only their new messages (history/transfer.py reads
the input, the stores' `import_conversation` writes it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.errors import InvalidInput, NotFound, PartialFailure, UsageError

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.history.types import Conversation, ConversationSummary, Message

PAGE = 500


def write_private(path: Path, data: bytes) -> None:
    """Write an export; a new file gets mode 0600 like the database it came from."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise InvalidInput(f"cannot write the export to {path}: {exc.strerror}.") from exc


def export_all(app: App, store: Store | None, fmt: str, path: Path | None) -> None:
    """Every conversation, oldest update first: `export` records with --json, else one
    compact JSON document per line (to stdout or FILE)."""
    import orjson

    from localgpt_cli.history.export import document

    if fmt != "json":
        raise UsageError("exporting every conversation needs --format json; give an ID "
                         "to export one as Markdown.")  # fmt: skip
    conversations: list[ConversationSummary] = []
    while store is not None:
        page = store.list_conversations(limit=PAGE, offset=len(conversations))
        conversations += page
        if len(page) < PAGE:
            break
    lines = []
    for summary in reversed(conversations):
        assert store is not None
        conv = store.get(summary.id)
        doc = document(conv, store.messages(conv.id))
        if app.output.json and path is None:
            content = orjson.dumps(doc).decode()
            app.output.record({"type": "export", "conversation_id": conv.id, "format": "json",
                               "path": None, "bytes": len(content.encode()),
                               "content": content})  # fmt: skip
        else:
            lines.append(orjson.dumps(doc) + b"\n")
    if app.output.json and path is None:
        return
    data = b"".join(lines)
    if path is None:
        app.output.stdout.write(data.decode())
        app.output.stdout.flush()
        return
    write_private(path, data)
    app.output.info(f"Wrote {len(lines)} conversations ({len(data):,} bytes) to {path}.")


@click.command(
    "import",
    epilog="\b\nExamples:\n"
    "  localgpt history export --json | LOCALGPT_HISTORY_URL=postgresql://db/lg"
    " localgpt history import\n"
    "  localgpt history export 01JD3X4A > chat.json && localgpt history import chat.json\n",
)
@click.argument("source", metavar="[FILE]", required=False,
                type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--replace", is_flag=True,
              help="Overwrite stored messages that the export says differently.")
@json_option
@pass_app
def import_cmd(app: App, source: Path | None, replace: bool) -> None:
    """Store exported conversations in this history (from FILE, or stdin).

    Reads `history export --json` records, an exported JSON document, or one document a
    line. Ids are kept: importing twice adds nothing. The whole input is checked before
    anything is stored; each conversation is stored whole or not at all. A stored message
    that the export says differently is a conflict: that conversation is left as it is
    (exit 5) unless --replace. With --json, one `import` record per conversation:
    {conversation_id, added, status}.
    """
    from localgpt_cli.history.transfer import read_exports

    where = "stdin" if source is None or str(source) == "-" else str(source)
    try:
        if where == "stdin":
            if sys.stdin is None or sys.stdin.isatty():
                raise UsageError("nothing to import: pipe `localgpt history export --json` "
                                 "in, or name a FILE.")  # fmt: skip
            text = sys.stdin.read()
        else:
            text = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {where}: {exc}.") from None
    exported = read_exports(text, where)
    store = app.history()
    assert store is not None
    totals = {"added": 0, "updated": 0, "unchanged": 0, "conflict": 0}
    messages = 0
    for conversation, rows in exported:
        status, added = _import_one(app, store, conversation, rows, replace)
        totals[status] += 1
        messages += added
        if app.output.json:
            app.output.record({"type": "import", "conversation_id": conversation.id,
                               "added": added, "status": status})  # fmt: skip
    app.output.info(f"Imported {totals['added']} new and {totals['updated']} grown "
                    f"conversations ({messages:,} messages); {totals['unchanged']} "
                    f"{'was' if totals['unchanged'] == 1 else 'were'} already here.")
    if totals["conflict"]:
        n = totals["conflict"]
        raise PartialFailure(
            f"{n} conversation{'s' if n > 1 else ''} of the input "
            f"{'say' if n > 1 else 'says'} something else than the stored "
            f"cop{'ies' if n > 1 else 'y'}; left unchanged.",
            code="import_conflict", hint="The warnings above say which; `history import "
            "--replace` overwrites the messages an export says differently.")


def _import_one(app: App, store: Store, conversation: Conversation, rows: list[Message],
                replace: bool) -> tuple[str, int]:  # fmt: skip
    """(status, messages written) of one conversation; a conflict is warned about (the
    message says which) and costs only this conversation."""
    from localgpt_cli.history.transfer import ImportConflict

    try:
        known = store.get(conversation.id) is not None
    except NotFound:
        known = False
    try:
        added = store.import_conversation(conversation, rows, replace=replace)
    except ImportConflict as exc:
        app.output.warn(exc.code, str(exc))
        return "conflict", 0
    return "added" if not known else "updated" if added else "unchanged", added
