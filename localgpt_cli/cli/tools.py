"""`localgpt tools`: the tools a chat can offer the model (list, show)."""

from __future__ import annotations

import json
from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.render.tables import print_table

EPILOG = """\b
Examples:
  localgpt tools                         # same as: localgpt tools list
  localgpt tools --functions mytools.py  # include the functions of a file
  localgpt tools show calculator --json | jq 'select(.type=="tool").parameters'
"""

_functions = click.option(
    "--functions", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
    help="Python file whose top-level functions become tools (repeatable).",
)


@click.group(invoke_without_command=True, epilog=EPILOG)
@_functions
@json_option
@click.pass_context
def tools(ctx: click.Context, functions: tuple[str, ...]) -> None:
    """List and inspect the tools the agent loop can call."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, functions=functions)


def _note(why: str | None) -> str | None:
    return f"unavailable: {why}" if why else None


def _record(tool: Any, why: str | None) -> dict[str, Any]:
    """The `tool` record: the definition, and whether a chat would offer it (and why not)."""
    from localgpt_cli.tools.base import describe

    return describe(tool) | {"available": why is None, "note": _note(why)}


@tools.command("list", epilog="Example:\n\n  localgpt tools list --json | jq -r "
               "'select(.type==\"tool\").name'")
@_functions
@json_option
@pass_app
def list_cmd(app: App, functions: tuple[str, ...]) -> None:
    """Name, group, core, preview, source (builtin, plugin:…, file:…), description, note.

    `chat --tools GROUP,…` offers only those groups; a core tool is offered on every turn
    of its group; a preview tool shows the user its result instead of acting.

    A tool a chat would not offer now (no knowledge base, no OLLAMA_API_KEY) is listed
    with a note saying why.
    """
    from localgpt_cli.cli.toolbox import tool_listing

    listing = tool_listing(app, functions)
    if app.output.json:
        for tool, why in listing:
            record = _record(tool, why)
            record.pop("parameters")
            app.output.record(record)
        return
    rows = [[t.name, t.group, "yes" if t.core else "", "yes" if t.preview else "", t.source,
             t.description.split(". ")[0], _note(why) or ""] for t, why in listing]
    print_table(app.output, ["NAME", "GROUP", "CORE", "PREVIEW", "SOURCE", "DESCRIPTION", "NOTE"],
                rows)


@tools.command("show", epilog="Example:\n\n  localgpt tools show read_file")
@click.argument("name")
@_functions
@json_option
@pass_app
def show_cmd(app: App, name: str, functions: tuple[str, ...]) -> None:
    """A tool's description, examples and parameter schema."""
    from localgpt_cli.cli.toolbox import tool_listing
    from localgpt_cli.tools.registry import Registry

    listing = tool_listing(app, functions)
    tool = Registry(t for t, _ in listing)[name]  # NotFound lists the known names
    why = dict((t.name, w) for t, w in listing)[name]
    record = _record(tool, why) | {"examples": list(tool.examples)}
    if app.output.json:
        app.output.record(record)
        return
    rows = [["name", tool.name], ["source", tool.source], ["group", tool.group],
            ["core", "yes" if tool.core else "no"], ["preview", "yes" if tool.preview else "no"],
            ["available", f"no: {why}" if why else "yes"],
            ["description", tool.description],
            ["examples", "; ".join(tool.examples) or "-"],
            ["parameters", json.dumps(tool.parameters, indent=2, ensure_ascii=False)]]
    print_table(app.output, ["", ""], rows, header=False)
