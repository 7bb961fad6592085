"""`localgpt models`: list (the default), show, ps, pull."""

from __future__ import annotations

from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.render.tables import human_size, print_table

EPILOG = """\b
Examples:
  localgpt models                      # same as: localgpt models list
  localgpt models --json | jq -r .name
  localgpt models show qwen3
  localgpt models ps
  localgpt models pull llama3.2
"""


_refresh_option = click.option(
    "--refresh", is_flag=True, help="Ask Ollama now instead of the 5-minute cache."
)


@click.group(invoke_without_command=True, epilog=EPILOG)
@_refresh_option
@json_option
@click.pass_context
def models(ctx: click.Context, refresh: bool) -> None:
    """List, inspect and pull the models of the Ollama server."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, refresh=refresh)


@models.command("list", epilog="Example:\n\n  localgpt models list --refresh --json")
@_refresh_option
@json_option
@pass_app
def list_cmd(app: App, refresh: bool) -> None:
    """List installed models: name, size, family, parameters, quantization, modified."""
    found, _cached = app.catalog.list(refresh=refresh)
    if app.output.json:
        for m in found:
            app.output.record(m.to_record())
        return
    rows = [
        [m.name, human_size(m.size), m.family or "", m.parameters or "", m.quantization or "",
         (m.modified_at or "")[:19].replace("T", " ")]
        for m in found
    ]
    print_table(
        app.output,
        ["NAME", "SIZE", "FAMILY", "PARAMS", "QUANT", "MODIFIED"],
        rows,
        empty="No models installed. Pull one with: localgpt models pull llama3.2",
    )


@models.command("show", epilog="Example:\n\n  localgpt models show qwen3 --json | jq .capabilities")
@click.argument("name")
@json_option
@pass_app
def show_cmd(app: App, name: str) -> None:
    """Capabilities, context length, parameters and template of one model."""
    info = app.catalog.show_resolved(name, app.output.warn, refresh=True)
    record = info.to_record()
    if app.output.json:
        app.output.record(record)
        return
    summary = record["template_summary"]
    rows: list[list[Any]] = [
        ["name", info.name],
        ["capabilities", ", ".join(info.capabilities) or "-"],
        ["context length", f"{info.context_length:,}" if info.context_length else "unknown"],
        ["family", info.family or "-"],
        ["parameters", info.parameter_size or "-"],
        ["quantization", info.quantization or "-"],
        ["template", f"{summary['lines']} lines; {summary['first_line']}"],
    ]
    if info.parameters:
        rows.append(["model parameters", " ".join(info.parameters.split())])
    print_table(app.output, ["", ""], rows, header=False)


@models.command("ps", epilog="Example:\n\n  localgpt models ps --json")
@json_option
@pass_app
def ps_cmd(app: App) -> None:
    """Models loaded in memory right now."""
    running = app.ollama.running()
    if app.output.json:
        for m in running:
            app.output.record(m.to_record())
        return
    rows = [
        [m.name, human_size(m.size), human_size(m.size_vram), m.context_length or "",
         (m.expires_at or "")[:19].replace("T", " ")]
        for m in running
    ]
    print_table(app.output, ["NAME", "SIZE", "VRAM", "CONTEXT", "UNTIL"], rows,
                empty="No model is loaded.")


@models.command("pull", epilog="Example:\n\n  localgpt models pull nomic-embed-text")
@click.argument("name")
@json_option
@pass_app
def pull_cmd(app: App, name: str) -> None:
    """Download a model, with a progress bar on a terminal (progress records with --json)."""
    from localgpt_cli.render.pull import PullView

    view = PullView(app.output, name)
    try:
        for event in app.ollama.pull(name):
            view.show(event)
    finally:
        view.close()
