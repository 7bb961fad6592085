"""`localgpt apply ID` and `localgpt history last-preview`: what the user does with a preview.

Previews live in the history, in the metadata of the tool message that produced them,
so both commands scan the newest conversations' messages for them; nothing else keeps
state. The history is not trusted (an import, a shared server): `apply` writes only edits,
only inside the folders this invocation allows, only after showing the diff and asking,
and only when the file is still the one the diff was made against; a proposed command is
never run by localgpt (`last-preview` prints it, and running it is the user's own choice).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.confirm import refuse_without_terminal, yes_option
from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound, UsageError

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.tools.edit import PlannedEdit

SCAN_CONVERSATIONS = 50  # how far back previews are looked for

EPILOG = """\b
Examples:
  localgpt apply 3f9a1c2e            # the id the preview's frame shows
  localgpt apply 3f                  # a unique prefix is enough
  cd ~ && localgpt apply 3f9a1c2e    # from a folder holding the file (and its chat's)
  localgpt apply -y 3f9a1c2e --json | jq -r 'select(.type=="applied").backup'
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


def plan_preview(
    app: App, preview: dict[str, Any], trust_imported: bool = False,
    allow_folders: tuple[str, ...] = (),
) -> PlannedEdit:
    """Every check `apply` makes, nothing written: the PlannedEdit, or InvalidInput (exit 6)
    saying why not. The file must lie inside what this invocation allows (the current
    folder, as read_file would see it here) and inside the roots the preview records, so a
    preview planted in the history (imported, or written to a shared server) cannot name
    a file elsewhere; one that came from `history import` needs `trust_imported`. The
    invocation's folders are the file tools' (`file_roots`: not $HOME or /, plus
    `--allow-folder` in the REPL), and their secrets rules hold for writing too."""
    from localgpt_cli.cli.toolbox import deny_list, file_roots
    from localgpt_cli.tools.base import ToolError
    from localgpt_cli.tools.edit import plan_edit
    from localgpt_cli.tools.preview import recorded_roots
    from localgpt_cli.tools.sandbox import Sandbox

    if preview.get("imported") and preview.get("kind") == "edit" and not trust_imported:
        raise InvalidInput(
            f"preview {preview['id']} came from `localgpt history import` (a file anyone "
            "could have written); it was not applied.",
            hint="Read its diff (`localgpt history last-preview` or `history show`), then "
                 "pass --trust-imported to apply it. Nothing was written.")
    roots = file_roots(app, allow_folders)
    sandboxes = [Sandbox(roots.roots, roots.cwd, deny_list(app))]
    recorded = recorded_roots(preview.get("roots"))
    if recorded:
        sandboxes.append(Sandbox(recorded, recorded[0]))
    try:
        return plan_edit(preview, sandboxes)
    except ToolError as exc:
        raise InvalidInput(str(exc), hint="Nothing was written.") from None


def write_planned(plan: PlannedEdit) -> tuple[Path, Path]:
    """Write a planned edit: (file, backup), or InvalidInput with nothing written."""
    from localgpt_cli.tools.base import ToolError

    try:
        return plan.write()
    except ToolError as exc:
        said = "nothing was written" in str(exc).lower()  # most refusals say so already
        raise InvalidInput(str(exc), hint=None if said else "Nothing was written.") from None
    except OSError as exc:
        raise InvalidInput(f"cannot write {plan.path}: {exc.strerror or exc}",
                           hint="Nothing was written.") from None


def offer_edits(turns: Any, screen: Any, previews: list[dict[str, Any]]) -> None:
    """At the REPL: `y` applies each proposed edit of the answer with `localgpt apply`'s
    checks (made before asking) against the folders of this chat; when its turns are not
    kept (--no-save) this is the only chance, `apply` will not find it later."""
    kept = turns.kept
    for preview in previews:
        if preview.get("kind") != "edit":
            continue
        try:
            plan = plan_preview(turns.app, preview, allow_folders=turns.flags.allow_folders)
        except InvalidInput as exc:
            screen.note(f"Not applied: {exc}")
            continue
        if not screen.confirm(f"Apply edit {preview['id']} to {preview.get('path')}?"):
            screen.note(f"Not applied; later: localgpt apply {preview['id']}" if kept
                        else "Not applied (not kept in the history).")
            continue
        try:
            path, backup = write_planned(plan)
        except InvalidInput as exc:
            screen.note(f"Not applied: {exc}")
            continue
        screen.note(f"Applied {preview['id']} to {path} (backup: {backup}).")


@click.command(epilog=EPILOG)
@click.argument("preview_id", metavar="ID")
@click.option("--trust-imported", is_flag=True,
              help="Also apply a preview that came from `history import` (still checked, "
                   "shown and asked).")
@yes_option
@json_option
@pass_app
def apply(app: App, preview_id: str, trust_imported: bool, yes: bool) -> None:
    """Apply an edit the model proposed (propose_edit), by its preview id.

    The file must lie inside the current folder (the folders read_file sees here) and
    inside those recorded when the edit was proposed, with no symlinked folder on the way;
    it must be writable and unchanged since the diff was made. The diff is shown and you
    are asked (-y without a terminal); the old file is kept beside it as FILE.ID.bak, and
    the new one is written atomically with the old owner and mode. A preview brought in
    by `history import` needs --trust-imported. Commands are never run.
    """
    from localgpt_cli.render.preview import review
    from localgpt_cli.render.tables import quote_path

    preview = find_preview(app.history(readonly=True), preview_id)
    plan = plan_preview(app, preview, trust_imported)
    refuse_without_terminal(yes, f"apply edit {preview['id']}")
    if not (yes and app.output.json):
        review(app.output, preview)
    question = f"Apply edit {preview['id']} to {quote_path(str(plan.path))}?"
    if not yes and not click.confirm(question, default=False, err=True):
        app.output.stderr.write("Not applied; nothing was written.\n")
        return
    path, backup = write_planned(plan)
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
