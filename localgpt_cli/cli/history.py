"""`localgpt history`: list (the default), show, search, rm, export, import, prune.

Read commands never create the database: with no history.db yet they say so and exit
0 (or, for a named id, exit 6 as for any unknown id). Deleting asks first on a terminal
and refuses without `-y` when nobody can answer (a pipe, cron), so a script cannot
delete by accident and cannot hang on a prompt either.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.apply import last_preview
from localgpt_cli.cli.confirm import ask, refuse_without_terminal, yes_option
from localgpt_cli.cli.history_transfer import import_cmd, write_private
from localgpt_cli.errors import AmbiguousId, NotFound, UsageError
from localgpt_cli.history.prune import count_older, cutoff, parse_age, spell_age
from localgpt_cli.history.short_ids import short_ids
from localgpt_cli.pairing import paired
from localgpt_cli.render.history import (
    hit_marks,
    print_conversations,
    print_doomed,
    print_export,
    print_hits,
    print_pruned,
    print_removed,
)
from localgpt_cli.render.transcript import print_transcript

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.history.types import Conversation

EPILOG = """\b
Examples:
  localgpt history                        # same as: localgpt history list
  localgpt history -n 5 --json | jq -r 'select(.type=="conversation").id'
  localgpt history show latest
  localgpt history show 01JD3X4A --thinking
  localgpt history search "vpn timeout"
  localgpt history export latest --format markdown -o chat.md
  localgpt history export --json | LOCALGPT_HISTORY_URL=postgresql://db/lg localgpt history import
  localgpt history rm 01JD3X4A 01JD3Y
  localgpt history prune --older-than 30d -y

\b
IDs: a full id, a unique prefix of one (as `history` shows it), or `latest`.
"""

EMPTY = 'No conversations yet. Start one with: localgpt chat "…"'
DEFAULT_LIMIT = 20


# -- shared helpers -------------------------------------------------------------------


def _open(app: App) -> Store | None:
    """The history store, or None when there is no history.db yet (nothing is created)."""
    return app.history(readonly=True)


def _resolve(store: Store | None, reference: str) -> Conversation:
    """A conversation by id, prefix or `latest`; errors as one line (titles may hold newlines)."""
    if store is None:
        raise NotFound(
            "there are no conversations yet.",
            hint='`localgpt chat "…"` starts one.',
        )
    try:
        return store.resolve(reference)
    except AmbiguousId as exc:
        raise AmbiguousId(
            " ".join(exc.message.split()), candidates=exc.candidates, hint=exc.hint
        ) from None


def _limit_option(f: Any) -> Any:
    return click.option(
        "-n", "--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True,
        metavar="N", help="How many to show.",
    )(f)


# -- the group and list -----------------------------------------------------------------


@click.group(invoke_without_command=True, epilog=EPILOG)
@_limit_option
@json_option
@click.pass_context
def history(ctx: click.Context, limit: int) -> None:
    """Stored conversations: list, show, search, export and delete them."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, limit=limit)


@history.command("list", epilog="Example:\n\n  localgpt history list -n 50 --json")
@_limit_option
@json_option
@pass_app
def list_cmd(app: App, limit: int) -> None:
    """List conversations, newest first.

    Columns: id, title, model, messages, updated. A terminal shows ids cut to their
    shortest unique prefix (at least 8 characters); a pipe and --json get full ids.
    """
    store = _open(app)
    found = [] if store is None else store.list_conversations(limit=limit + 1)
    more = len(found) > limit
    found = found[:limit]
    if not found:
        app.output.info(EMPTY)
        return
    short: dict[str, str] = {}
    if app.output.pretty and store is not None:
        short = short_ids(store, [c.id for c in found])
    print_conversations(app.output, found, short)
    if more:
        app.output.info(f"(showing the latest {limit}; -n {limit * 2} shows more)")


# -- show -------------------------------------------------------------------------------


@history.command(
    "show",
    epilog="\b\nExamples:\n  localgpt history show latest\n"
    "  localgpt history show 01JD3X4A --thinking\n"
    "  localgpt history show latest --json | jq -r 'select(.role==\"assistant\").content'",
)
@click.argument("conversation", metavar="ID|latest")
@click.option("--thinking", is_flag=True, help="Show the model's reasoning instead of folding it.")
@json_option
@pass_app
def show_cmd(app: App, conversation: str, thinking: bool) -> None:
    """Show the transcript of a conversation.

    Assistant answers are rendered as Markdown on a terminal, plain text in a pipe.

    Thinking is folded into one line unless --thinking; tool calls are shown as
    name(args) -> result. With --json: one `message` record per stored message.
    """
    store = _open(app)
    found = _resolve(store, conversation)
    assert store is not None
    messages = paired(store.messages(found.id))  # each answer after its question
    if app.output.json:
        for m in messages:
            app.output.record(m.to_record())
    else:
        print_transcript(app.output, found, messages, thinking)


# -- search -----------------------------------------------------------------------------


@history.command(
    "search",
    epilog="\b\nExamples:\n  localgpt history search vpn timeout\n"
    "  localgpt history search -n 5 --json -- \"-ENOSPC\" | jq -r "
    "'select(.type==\"search_hit\").conversation_id'",
)
@click.argument("text", nargs=-1, required=True)
@_limit_option
@json_option
@pass_app
def search_cmd(app: App, text: tuple[str, ...], limit: int) -> None:
    """Full-text search over every stored message.

    Finds messages containing all the words of TEXT, best match first, with snippets.

    Any text is taken literally (quotes, -, *, AND/OR are plain words). On a terminal
    the matched words are highlighted; --json snippets mark them with **.
    """
    query = " ".join(text)
    if not query.strip():
        raise UsageError("nothing to search for: the search text is empty.")
    store = _open(app)
    if store is None:
        app.output.info(EMPTY)
        return
    marks = hit_marks(app.output)  # None: --json keeps the store's own ** marks
    if marks is None:
        hits = store.search(query, limit)
    else:
        hits = store.search(query, limit, highlight=marks)
    if not hits:
        # An empty history (a new server, the memory backend) says so, as a missing file does.
        empty = not store.list_conversations(limit=1)
        app.output.info(EMPTY if empty else f"No messages match {query!r}.")
        return
    short: dict[str, str] = {}
    if app.output.pretty:
        short = short_ids(store, list(dict.fromkeys(h.conversation_id for h in hits)))
    print_hits(app.output, hits, short)


# -- rm ---------------------------------------------------------------------------------


@history.command(
    "rm",
    epilog="\b\nExamples:\n  localgpt history rm 01JD3X4A\n"
    "  localgpt history rm -y latest\n"
    "  localgpt history -n 100 --json | jq -r 'select(.model==\"llama3.2\").id'"
    " | xargs localgpt history rm -y",
)
@click.argument("conversations", metavar="ID...", nargs=-1, required=True)
@yes_option
@json_option
@pass_app
def rm_cmd(app: App, conversations: tuple[str, ...], yes: bool) -> None:
    """Delete conversations and their messages.

    Asks first on a terminal; without one, refuses (exit 2) unless -y. All or nothing:
    when any ID is unknown or ambiguous nothing is deleted (exit 6).
    """
    store = _open(app)
    found = list({c.id: c for c in (_resolve(store, ref) for ref in conversations)}.values())
    assert store is not None
    noun = "conversation" if len(found) == 1 else "conversations"
    refuse_without_terminal(yes, f"delete {len(found)} {noun}")
    if not yes:
        print_doomed(app.output, found)
        if not ask(app, f"Delete {len(found)} {noun}?"):
            return
    store.delete([c.id for c in found])
    print_removed(app.output, found)


# -- export -----------------------------------------------------------------------------


@history.command(
    "export",
    epilog="\b\nExamples:\n  localgpt history export latest > chat.json\n"
    "  localgpt history export 01JD3X4A --format markdown -o chat.md",
)
@click.argument("conversation", metavar="[ID|latest]", required=False)
@click.option("-f", "--format", "fmt", type=click.Choice(["json", "markdown"]),
              default="json", show_default=True,
              help="json keeps every stored field; markdown reads like the chat.")
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Write to FILE instead of stdout.")
@json_option
@pass_app
def export_cmd(app: App, conversation: str | None, fmt: str, path: Path | None) -> None:
    """Write a whole conversation as JSON or Markdown; without ID, every conversation.

    With --json, stdout gets one `export` record per conversation (the document in
    `content` when no FILE is given): what `history import` reads. Without ID and
    --json, one JSON document a line.
    """
    store = _open(app)
    if conversation is None:
        from localgpt_cli.cli.history_transfer import export_all

        export_all(app, store, fmt, path)
        return
    found = _resolve(store, conversation)
    assert store is not None
    document = store.export(found.id, fmt)
    data = document.encode("utf-8")
    if path is not None:
        write_private(path, data)
    print_export(app.output, found.id, fmt, document, path, len(data))


# -- prune ------------------------------------------------------------------------------


class Duration(click.ParamType):
    """An age like 90m, 12h, 30d or 2w (a positive whole number and a unit)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_age(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@history.command(
    "prune",
    epilog="\b\nExamples:\n  localgpt history prune --older-than 30d\n"
    "  localgpt history prune --older-than 2w -y --json",
)
@click.option("--older-than", "age", type=Duration(), required=True, metavar="AGE",
              help="Delete conversations not updated for AGE: 90m, 12h, 30d, 2w.")
@yes_option
@json_option
@pass_app
def prune_cmd(app: App, age: timedelta, yes: bool) -> None:
    """Delete conversations not updated for a while.

    Reports how many were deleted. Asks first on a terminal; without one, refuses
    (exit 2) unless -y, also when there is nothing to delete, so a script that works
    today keeps working.
    """
    words = spell_age(age)
    refuse_without_terminal(yes, f"prune conversations older than {words}")
    store = _open(app)
    before = cutoff(age)
    removed = 0
    if store is not None:
        old = 0 if yes else count_older(store, before)
        noun = "conversation" if old == 1 else "conversations"
        if yes or (old and ask(app, f"Delete {old} {noun} not updated for {words}?")):
            removed = store.prune(age)
        elif old:
            return
    print_pruned(app.output, removed, age, words, before)


# -- last-preview: the newest preview (cli/apply.py) --------------------------------------

history.add_command(last_preview)

# `history import` lives in history_transfer.py with the rest of moving histories.
history.add_command(import_cmd)

# `history mark` (conversation memory, issue 17) lives in history_mark.py.
from localgpt_cli.cli.history_mark import mark  # noqa: E402

history.add_command(mark)
