"""`localgpt apply ID` and `localgpt history last-preview`: what the user does with a preview.

Previews live in the history, in the metadata of the tool message that produced them,
so both commands scan the newest conversations' messages for them; nothing else keeps
state. `apply` writes only edits, and only when the file is still the one the diff was
made against; a proposed command is never run by localgpt (`last-preview` prints it, and
running it is the user's own choice).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound, UsageError

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

SCAN_CONVERSATIONS = 50  # how far back previews are looked for

EPILOG = """\b
Examples:
  localgpt apply 3f9a1c2e            # the id the preview's frame shows
  localgpt apply 3f                  # a unique prefix is enough
  cd ~ && localgpt apply 3f9a1c2e    # from any folder: the edit's own roots are checked
  localgpt apply 3f9a1c2e --json | jq -r 'select(.type=="applied").backup'
"""


def recent_previews(store: Store | None, everything: bool = False) -> list[dict[str, Any]]:
    """Previews of the newest conversations (of every one with `everything`), newest
    first, each with its conversation."""
    if store is None:
        return []
    found: list[dict[str, Any]] = []
    for summary in _conversations(store, everything):
        for message in reversed(store.messages(summary.id)):
            preview = message.metadata.get("preview")
            if isinstance(preview, dict) and isinstance(preview.get("id"), str):
                found.append(preview | {"conversation_id": summary.id})
    return found


def _conversations(store: Store, everything: bool) -> Iterator[Any]:
    """The newest SCAN_CONVERSATIONS conversations, or every one, page by page."""
    if not everything:
        yield from store.list_conversations(limit=SCAN_CONVERSATIONS)
        return
    offset = 0
    while page := store.list_conversations(limit=500, offset=offset):
        yield from page
        offset += len(page)


def find_preview(store: Store | None, reference: str | None) -> dict[str, Any]:
    """The newest preview (`reference` None) or the one whose id starts with `reference`."""
    if reference is not None and not reference.strip():
        raise UsageError("The preview id is empty.",
                         hint="Give the id in the preview's frame: localgpt apply 3f9a1c2e.")
    previews = recent_previews(store)
    if reference is None:
        if not previews:
            raise NotFound("there is no preview in the history yet.",
                           hint="Previews come from propose_command and propose_edit.")
        return previews[0]
    matches = {p["id"]: p for p in previews if p["id"].startswith(reference.lower())}
    if not matches:  # an older conversation's: look through every one
        matches = {p["id"]: p for p in recent_previews(store, everything=True)
                   if p["id"].startswith(reference.lower())}  # fmt: skip
    if not matches:
        raise NotFound(f"no preview {reference!r} in the history.",
                       hint="The id is in the preview's frame.")
    if len(matches) > 1:
        raise AmbiguousId(f"preview id {reference!r} is ambiguous.",
                          candidates=sorted(matches), hint="Type more of the id.")
    return next(iter(matches.values()))


def apply_preview(preview: dict[str, Any], cwd: Path | None = None) -> tuple[Path, Path]:
    """Apply an edit inside the roots its tool call ran with, recorded in the preview, from
    whatever folder `apply` runs in; (file, backup). A preview stored before roots were
    recorded keeps the old rule: the current folder is the root."""
    from localgpt_cli.tools.base import ToolError
    from localgpt_cli.tools.files import Sandbox
    from localgpt_cli.tools.preview import apply_edit, recorded_roots

    base = cwd or Path.cwd()
    roots = recorded_roots(preview.get("roots"))
    sandbox = Sandbox(roots, roots[0]) if roots else Sandbox([base], base)
    try:
        return apply_edit(preview, sandbox)
    except ToolError as exc:
        said = "nothing was written" in str(exc).lower()  # most refusals say so already
        raise InvalidInput(str(exc), hint=None if said else "Nothing was written.") from None
    except OSError as exc:
        raise InvalidInput(f"cannot write {preview.get('path')}: {exc.strerror or exc}",
                           hint="Nothing was written.") from None


def offer_edits(screen: Any, previews: list[dict[str, Any]], kept: bool = True) -> None:
    """At the REPL: `y` applies each proposed edit of the answer, as `localgpt apply` does;
    `kept` False (--no-save): this is the only chance, `apply` will not find it later."""
    for preview in previews:
        if preview.get("kind") != "edit":
            continue
        if not screen.confirm(f"Apply edit {preview['id']} to {preview.get('path')}?"):
            screen.note(f"Not applied; later: localgpt apply {preview['id']}" if kept
                        else "Not applied (not kept in the history).")
            continue
        try:
            path, backup = apply_preview(preview)
        except InvalidInput as exc:
            screen.note(f"Not applied: {exc}")
            continue
        screen.note(f"Applied {preview['id']} to {path} (backup: {backup}).")


@click.command(epilog=EPILOG)
@click.argument("preview_id", metavar="ID")
@json_option
@pass_app
def apply(app: App, preview_id: str) -> None:
    """Apply an edit the model proposed (propose_edit), by its preview id.

    Runs from any folder: the file must lie inside the folders the chat's read_file could
    see when the edit was proposed (recorded in the preview) and be unchanged since the
    diff was made; the old file is kept beside it as FILE.ID.bak, and the new one is
    written atomically. Commands are never run.
    """
    preview = find_preview(app.history(readonly=True), preview_id)
    path, backup = apply_preview(preview)
    record = {"type": "applied", "id": preview["id"], "path": str(path), "backup": str(backup)}
    if app.output.json:
        app.output.record(record)
        return
    app.output.stdout.write(f"Applied {preview['id']} to {path} (backup: {backup}).\n")


@click.command("last-preview", epilog="""\b
Examples:
  eval "$(localgpt history last-preview)"     # run the last proposed command, your choice
  localgpt history last-preview --json | jq -r 'select(.type=="preview").id'
""")
@json_option
@pass_app
def last_preview(app: App) -> None:
    """Print the newest preview: a command as is (nothing else on stdout), a diff, a text.

    Running a proposed command is your decision: localgpt never runs it.
    """
    from localgpt_cli.render.preview import body

    preview = find_preview(app.history(readonly=True), None)
    if app.output.json:
        app.output.record({"type": "preview", **preview})
        return
    app.output.stdout.write(body(preview) + "\n")
