"""`localgpt memory`: project memory, short facts sent with every prompt.

`memory add "we deploy with Ansible, never by hand"` stores a fact for every chat (or,
with `--collection NAME`, for chats on that collection); `memory list` and `memory rm ID`
show and remove them. The store is localgpt_cli/project_memory.py; a chat puts the facts
right after the system rules, above files, sources and the conversation.
"""

from __future__ import annotations

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.project_memory import ProjectMemory
from localgpt_cli.render.memory import print_facts

EPILOG = """\b
Examples:
  localgpt memory add "we deploy with Ansible, never by hand"
  localgpt memory add -C papers "cite papers by first author and year"
  localgpt memory                        # same as: localgpt memory list
  localgpt memory list -C papers --json | jq -r .text
  localgpt memory rm 01JD3X4A

\b
A chat on collection NAME (-C) gets the global facts and NAME's, right after the
system prompt. IDs: a full id or a unique prefix of one.
"""

EMPTY = 'No project memory yet. Add a fact with: localgpt memory add "…"'


def _store(app: App, write: bool = False) -> ProjectMemory:
    if write:
        app.settings.writable_dir("home")
    return ProjectMemory(app.settings.home_dir)


@click.group(invoke_without_command=True, epilog=EPILOG)
@json_option
@click.pass_context
def memory(ctx: click.Context) -> None:
    """Project memory: facts sent with every prompt (global or per collection)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd)


@memory.command("add", epilog='Example:\n\n  localgpt memory add "the staging host is st-2"')
@click.argument("text", nargs=-1, required=True)
@click.option("-C", "--collection", metavar="NAME",
              help="Only for chats on this collection (default: every chat).")
@json_option
@pass_app
def add_cmd(app: App, text: tuple[str, ...], collection: str | None) -> None:
    """Add a fact (the words of TEXT, joined). The same fact twice is stored once."""
    fact, new = _store(app, write=True).add(" ".join(text), collection or None)
    print_facts(app.output, [fact], status="added" if new else "exists")


@memory.command("list", epilog="Example:\n\n  localgpt memory list --json | jq -r .text")
@click.option("-C", "--collection", metavar="NAME",
              help="Only the facts a chat on this collection gets (global and its own).")
@json_option
@pass_app
def list_cmd(app: App, collection: str | None = None) -> None:
    """List the facts, oldest first: id, scope (global or a collection), added, text."""
    facts = _store(app).facts()
    if collection is not None:
        facts = [f for f in facts if f.collection in (None, collection)]
    if not facts:
        app.output.info(EMPTY)
        return
    print_facts(app.output, facts)


@memory.command("rm", epilog="Example:\n\n  localgpt memory rm 01JD3X4A")
@click.argument("ids", nargs=-1, required=True, metavar="ID…")
@json_option
@pass_app
def rm_cmd(app: App, ids: tuple[str, ...]) -> None:
    """Remove facts by id (or a unique prefix); an unknown id removes none of them."""
    print_facts(app.output, _store(app, write=True).remove(*ids), status="removed")
