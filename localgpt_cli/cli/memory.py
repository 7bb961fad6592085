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
  localgpt memory list -C papers --json | jq -r 'select(.type=="memory").text'
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
@click.option("--important", is_flag=True,
              help="Keep it first when the facts pass their share of the prompt "
                   "(also marks a fact already stored).")
@json_option
@pass_app
def add_cmd(app: App, text: tuple[str, ...], collection: str | None, important: bool) -> None:
    """Add a fact (the words of TEXT, joined). The same fact twice is stored once."""
    store = _store(app, write=True)
    fact, new = store.add(" ".join(text), collection or None, important)
    print_facts(app.output, [fact], status="added" if new else "exists")
    _check_share(app, store, collection or app.settings.collection)


def _check_share(app: App, store: ProjectMemory, collection: str) -> None:
    """Warn when the facts a chat on `collection` gets pass their share of the prompt:
    with the default model's context when the model cache knows it (no server is asked),
    else with Ollama's default 4,096 tokens."""
    from localgpt_cli.config import cache_dir
    from localgpt_cli.kernel.context import SERVER_DEFAULT_CTX, prompt_budget
    from localgpt_cli.kernel.facts import RM_HINT, MemoryFact, fit_facts
    from localgpt_cli.kernel.memory import memory_settings
    from localgpt_cli.llm.catalog import cached_context

    settings = app.settings
    share = memory_settings(settings.values, settings.sources).project_share
    facts = [MemoryFact(f.text, f.important) for f in store.facts_for(collection)]
    model = str(settings.values["model"])
    known = cached_context(cache_dir() / "models.json", model)
    context = known or SERVER_DEFAULT_CTX
    fit = fit_facts(facts, prompt_budget(context, {}), share)
    if fit.left_out:
        window = (f"the {context:,}-token context of {model}" if known else
                  f"a {context:,}-token context (Ollama's default)")
        app.output.warn("project_memory_budget", (
            f"project memory for chats on {collection!r} now takes ~{fit.total:,} tokens, over "
            f"its share (memory.project_share = {share:g}) of the prompt with {window}, "
            f"~{fit.room:,} tokens: such a chat leaves out {fit.left_out:,} of its "
            f"{len(facts):,} facts, the oldest unimportant ones. {RM_HINT[0].upper()}"
            f"{RM_HINT[1:]}, or raise memory.project_share."))


@memory.command("list", epilog="Example:\n\n  localgpt memory list --json | jq -r "
                "'select(.type==\"memory\").text'")
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
