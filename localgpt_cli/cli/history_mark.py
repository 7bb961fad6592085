"""`localgpt history mark ID --important`: a turn conversation memory never lets fade.

Conversation memory (kernel/memory.py) scores older turns by relevance times a fading
weight; a turn with a message marked `metadata["important"] = true` keeps weight 1
however old it is. The REPL's `/remember` marks the last answer; this marks any message
after the fact (an id from `history show ID --json`, or a unique prefix of one, as with
conversation ids), or with `latest` the last message of the latest conversation.
"""

from __future__ import annotations

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.errors import NotFound, UsageError


@click.command(
    "mark",
    epilog="\b\nExamples:\n  localgpt history mark latest --important\n"
    "  localgpt history show latest --json | jq -r 'select(.role==\"user\") | .id'\n"
    "  localgpt history mark 01JD3X4AK2M9 --not-important   # a unique prefix of the id",
)
@click.argument("message_id", metavar="MESSAGE_ID|latest")
@click.option("--important/--not-important", default=None,
              help="Keep the message's turn in memory whatever its age, or let it fade again.")
@json_option
@pass_app
def mark(app: App, message_id: str, important: bool | None) -> None:
    """Mark a message's turn important for conversation memory (or not)."""
    if important is None:
        raise UsageError("Say which: --important or --not-important.")
    store = app.history(readonly=True)
    if store is None:
        raise NotFound("there are no conversations yet.", hint='`localgpt chat "…"` starts one.')
    if message_id.strip().lower() == "latest":
        conversation = store.latest()
        last = store.messages(conversation.id, last=1) if conversation else []
        if not last:
            raise NotFound("the latest conversation has no messages.")
        message_id = last[0].id
    else:
        message_id = store.resolve_message(message_id).id
    message = store.update_metadata(message_id, {"important": True if important else None})
    if app.output.json:
        app.output.record(message.to_record())
        return
    state = "important" if important else "not important"
    words = " ".join(message.content.split())
    preview = words[:60] + ("…" if len(words) > 60 else "")
    app.output.stdout.write(f"marked {message.id} {state}  ({message.role}: {preview})\n")
    app.output.stdout.flush()
