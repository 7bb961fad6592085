"""`localgpt history`: list (the default), show, search, rm, export, prune.

Read commands never create the database: with no history.db yet they say so and exit
0 (or, for a named id, exit 6 as for any unknown id). Deleting asks first on a terminal
and refuses without `-y` when nobody can answer (a pipe, cron), so a script cannot
delete by accident and cannot hang on a prompt either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.confirm import ask, refuse_without_terminal, yes_option
from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound, UsageError

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.history.types import Conversation, ConversationSummary, Message

EPILOG = """\b
Examples:
  localgpt history                        # same as: localgpt history list
  localgpt history -n 5 --json | jq -r .id
  localgpt history show latest
  localgpt history show 01JD3X4A --thinking
  localgpt history search "vpn timeout"
  localgpt history export latest --format markdown -o chat.md
  localgpt history rm 01JD3X4A 01JD3Y
  localgpt history prune --older-than 30d -y

\b
IDs: a full id, a unique prefix of one (as `history` shows it), or `latest`.
"""

EMPTY = 'No conversations yet. Start one with: localgpt chat "…"'
DEFAULT_LIMIT = 20
# Pretty tables show ids cut to the shortest unique prefix, but never shorter than this
# (8 Crockford characters cover the first 38 bits of the creation time, about a second).
SHORT_ID_MIN = 8
# Private-use characters as snippet markers: they practically never occur in stored
# text, and are replaced by a style before anything is drawn.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_UNFINISHED = ("length", "max_iterations", "loop_guard", "aborted", "error")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


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


def _title(title: str | None) -> str:
    return title if title else "(untitled)"


def _local_time(stamp: str) -> str:
    """An ISO UTC stamp as local wall-clock time to the minute, for people."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def short_ids(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """Each id cut to its shortest prefix (>= SHORT_ID_MIN) that names it alone, like git.

    Unique among all stored ids, not just the shown ones, so a shortened id can be
    pasted back into `history show`. One indexed range lookup per id in the common case.
    """
    from localgpt_cli.ids import ID_LENGTH

    out: dict[str, str] = {}
    for cid in ids:
        length = SHORT_ID_MIN
        while length < ID_LENGTH:
            try:
                store.resolve(cid[:length])
                break
            except AmbiguousId as exc:
                # Skip past the characters shared with the candidates it listed.
                shared = max((len(os.path.commonprefix([cid, other]))
                              for other in exc.candidates if other != cid), default=length)
                length = max(length, shared) + 1
        out[cid] = cid[:length]
    return out


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
    if app.output.json:
        for c in found:
            app.output.record(c.to_record())
        return
    from localgpt_cli.render.tables import print_table

    headers = ["ID", "TITLE", "MODEL", "MESSAGES", "UPDATED"]
    if app.output.pretty:
        assert store is not None
        short = short_ids(store, [c.id for c in found])
        rows = [[short[c.id], _title(c.title), c.model, c.messages, _local_time(c.updated_at)]
                for c in found]
    else:
        rows = [[c.id, c.title or "", c.model, c.messages, c.updated_at] for c in found]
    print_table(app.output, headers, rows)
    if more:
        app.output.info(f"(showing the latest {limit}; -n {limit * 2} shows more)")


# -- show -------------------------------------------------------------------------------


def _call_parts(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Name and arguments of a stored tool call (Ollama's {"function": {...}} or flat)."""
    function = call.get("function", call)
    if not isinstance(function, dict):
        return "?", {"call": call}
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return str(function.get("name", "?")), arguments


def _tool_lines(messages: list[Message]) -> tuple[dict[str, list[str]], set[str]]:
    """`name(args) -> result` for each assistant tool call, and the tool messages used.

    A call's result is the following tool message with its call id, or else the next
    unused one in order (Ollama's tool messages often carry only a name). Tool messages
    used here are not shown again on their own.
    """
    from localgpt_cli.render.chat import tool_line

    lines: dict[str, list[str]] = {}
    used: set[str] = set()
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        results: list[Message] = []
        for later in messages[i + 1:]:
            if later.role != "tool":
                break
            results.append(later)
        out = []
        for call in message.tool_calls:
            name, arguments = _call_parts(call)
            call_id = call.get("id")
            match = next((r for r in results if r.id not in used and call_id
                          and r.tool_call_id == call_id), None)
            if match is None:
                match = next((r for r in results if r.id not in used), None)
            if match is not None:
                used.add(match.id)
            out.append(tool_line(name, arguments, None if match is None else match.content))
        lines[message.id] = out
    return lines, used


def _folded(thinking: str) -> str:
    return f"thinking: {len(thinking):,} chars — use --thinking to show"


def _unfinished(message: Message) -> str | None:
    reason = message.metadata.get("done_reason")
    if reason not in _UNFINISHED:
        return None
    error = message.metadata.get("error")
    detail = f": {error['message']}" if isinstance(error, dict) and "message" in error else ""
    return f"(answer incomplete: {reason}{detail})"


def _heading(message: Message) -> str:
    if message.role == "tool" and message.tool_name:
        return f"tool: {message.tool_name}"
    return message.role


def _show_plain(
    app: App, conversation: Conversation, messages: list[Message], thinking: bool
) -> None:
    calls, used = _tool_lines(messages)
    parts = [
        f"# {_title(conversation.title)}\n"
        f"id: {conversation.id}  model: {conversation.model}  "
        f"messages: {conversation.messages}  updated: {conversation.updated_at}\n"
    ]
    for m in messages:
        if m.id in used:
            continue
        block = [f"## {_heading(m)}"]
        if m.thinking:
            if thinking:
                block.append("thinking:")
                block.extend(f"> {line}" if line else ">" for line in m.thinking.splitlines())
            else:
                block.append(_folded(m.thinking))
        if m.content:
            block.append(m.content.rstrip("\n"))
        block.extend(calls.get(m.id, []))
        note = _unfinished(m)
        if note:
            block.append(note)
        parts.append("\n".join(block) + "\n")
    app.output.stdout.write("\n".join(parts))
    app.output.stdout.flush()


def _show_pretty(
    app: App, conversation: Conversation, messages: list[Message], thinking: bool
) -> None:
    from rich.markdown import Markdown
    from rich.rule import Rule
    from rich.text import Text

    console = app.output.console()
    calls, used = _tool_lines(messages)
    console.print(Text(_title(conversation.title), style="bold"))
    console.print(Text(
        f"{conversation.id} · {conversation.model} · {conversation.messages} messages · "
        f"updated {_local_time(conversation.updated_at)}", style="dim"))
    styles = {"user": "bold green", "assistant": "bold cyan", "system": "bold magenta",
              "tool": "bold yellow"}
    for m in messages:
        if m.id in used:
            continue
        console.print()
        console.print(Rule(Text(f" {_heading(m)} ", style=styles.get(m.role, "bold")),
                           align="left", style="dim"))
        if m.thinking:
            if thinking:
                console.print(Text(m.thinking, style="dim italic"))
            else:
                console.print(Text(_folded(m.thinking), style="dim"))
        if m.content:
            if m.role == "assistant":
                console.print(Markdown(m.content))
            else:
                console.print(Text(m.content))
        for line in calls.get(m.id, []):
            console.print(Text(line, style="yellow"))
        note = _unfinished(m)
        if note:
            console.print(Text(note, style="red"))


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
    messages = store.messages(found.id)
    if app.output.json:
        for m in messages:
            app.output.record(m.to_record())
    elif app.output.pretty:
        _show_pretty(app, found, messages, thinking)
    else:
        _show_plain(app, found, messages, thinking)


# -- search -----------------------------------------------------------------------------


def _snippet_text(snippet: str) -> Any:
    """A marked snippet as rich Text with the matched words highlighted."""
    from rich.text import Text

    text = Text()
    for i, part in enumerate(re.split(f"[{_MARK_OPEN}{_MARK_CLOSE}]", snippet)):
        text.append(part, style="bold yellow" if i % 2 else "")
    return text


@history.command(
    "search",
    epilog="\b\nExamples:\n  localgpt history search vpn timeout\n"
    "  localgpt history search -n 5 --json -- \"-ENOSPC\" | jq -r .conversation_id",
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
    if app.output.json:
        hits = store.search(query, limit)
    elif app.output.pretty:
        hits = store.search(query, limit, highlight=(_MARK_OPEN, _MARK_CLOSE))
    else:
        hits = store.search(query, limit, highlight=("", ""))
    if not hits:
        app.output.info(f"No messages match {query!r}.")
        return
    if app.output.json:
        for hit in hits:
            app.output.record(hit.to_record())
        return
    if app.output.pretty:
        from rich.text import Text

        console = app.output.console()
        short = short_ids(store, list(dict.fromkeys(h.conversation_id for h in hits)))
        for hit in hits:
            head = Text(f"{hit.rank:>3}  ")
            head.append(short[hit.conversation_id], style="cyan")
            head.append(f"  {_title(hit.title)}", style="bold")
            head.append(f"  {hit.role} #{hit.seq} · {_local_time(hit.created_at)}", style="dim")
            console.print(head)
            body = Text("     ")
            body.append_text(_snippet_text(" ".join(hit.snippet.split())))
            console.print(body)
        return
    from localgpt_cli.render.tables import print_table

    rows = [[h.rank, h.conversation_id, h.seq, h.role, h.title or "", " ".join(h.snippet.split())]
            for h in hits]
    print_table(app.output, ["RANK", "CONVERSATION", "SEQ", "ROLE", "TITLE", "SNIPPET"], rows)


# -- rm ---------------------------------------------------------------------------------


def _removed_record(c: ConversationSummary) -> dict[str, Any]:
    return {"type": "conversation", "status": "removed",
            **{k: v for k, v in c.to_record().items() if k != "type"}}


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
        for c in found:
            app.output.stderr.write(f"  {c.id}  {_title(c.title)} ({c.messages} messages)\n")
        if not ask(app, f"Delete {len(found)} {noun}?"):
            return
    store.delete([c.id for c in found])
    for c in found:
        if app.output.json:
            app.output.record(_removed_record(c))
        else:
            app.output.stdout.write(f"removed {c.id}  {_title(c.title)} ({c.messages} messages)\n")
    app.output.stdout.flush()


# -- export -----------------------------------------------------------------------------


def _write_private(path: Path, data: bytes) -> None:
    """Write an export; a new file gets mode 0600 like the database it came from."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise InvalidInput(f"cannot write the export to {path}: {exc.strerror}.") from exc


@history.command(
    "export",
    epilog="\b\nExamples:\n  localgpt history export latest > chat.json\n"
    "  localgpt history export 01JD3X4A --format markdown -o chat.md",
)
@click.argument("conversation", metavar="ID|latest")
@click.option("-f", "--format", "fmt", type=click.Choice(["json", "markdown"]),
              default="json", show_default=True,
              help="json keeps every stored field; markdown reads like the chat.")
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Write to FILE instead of stdout.")
@json_option
@pass_app
def export_cmd(app: App, conversation: str, fmt: str, path: Path | None) -> None:
    """Write a whole conversation as JSON or Markdown.

    With --json, stdout gets one `export` record (the document in `content` when no
    FILE is given).
    """
    store = _open(app)
    found = _resolve(store, conversation)
    assert store is not None
    document = store.export(found.id, fmt)
    data = document.encode("utf-8")
    if path is not None:
        _write_private(path, data)
    record: dict[str, Any] = {"type": "export", "conversation_id": found.id, "format": fmt,
                              "path": None if path is None else str(path), "bytes": len(data)}
    if app.output.json:
        if path is None:
            record["content"] = document
        app.output.record(record)
    elif path is None:
        app.output.stdout.write(document)
        app.output.stdout.flush()
    else:
        app.output.info(f"Wrote {len(data):,} bytes to {path}.")


# -- prune ------------------------------------------------------------------------------


class Duration(click.ParamType):
    """An age like 90m, 12h, 30d or 2w (a positive whole number and a unit)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        match = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", str(value), flags=re.IGNORECASE)
        if match is None:
            self.fail(f"{value!r} is not a duration: use a number and m, h, d or w "
                      "(90m, 12h, 30d, 2w).", param, ctx)
        amount = int(match.group(1))
        if amount == 0:
            self.fail(f"{value!r} is zero: give an age greater than zero.", param, ctx)
        try:
            age = timedelta(**{_UNITS[match.group(2).lower()]: amount})
            datetime.now(timezone.utc) - age
        except OverflowError:
            self.fail(f"{value!r} is longer than the calendar goes back.", param, ctx)
        return age


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
    from localgpt_cli.history.rows import iso

    words = _spell(age)
    refuse_without_terminal(yes, f"prune conversations older than {words}")
    store = _open(app)
    cutoff = iso(datetime.now(timezone.utc) - age)
    removed = 0
    if store is not None:
        # Counted only to ask; the store applies its own cutoff when it deletes.
        old = 0 if yes else sum(
            1 for c in store.list_conversations(limit=sys.maxsize) if c.updated_at < cutoff
        )
        noun = "conversation" if old == 1 else "conversations"
        if yes or (old and ask(app, f"Delete {old} {noun} not updated for {words}?")):
            removed = store.prune(age)
        elif old:
            return
    if app.output.json:
        app.output.record({"type": "summary", "removed": removed,
                           "older_than_seconds": int(age.total_seconds()), "cutoff": cutoff})
    else:
        noun = "conversation" if removed == 1 else "conversations"
        app.output.stdout.write(f"removed {removed} {noun} not updated for {words}\n")
        app.output.stdout.flush()


def _spell(age: timedelta) -> str:
    """An age in the largest unit that divides it exactly: 2 weeks, 36 hours."""
    seconds = int(age.total_seconds())
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"
