"""`localgpt models`: list (the default), show, ps, pull."""

from __future__ import annotations

from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app, provider_option
from localgpt_cli.config import cache_dir
from localgpt_cli.llm.catalog import ModelCatalog
from localgpt_cli.llm.provider import ModelSummary
from localgpt_cli.render.tables import human_size, print_table

EPILOG = """\b
Examples:
  localgpt models                      # same as: localgpt models list
  localgpt models --json | jq -r 'select(.type=="model").name'
  localgpt models --json | jq -r 'select(.capabilities | index("vision")) | .name'
  localgpt models show qwen3
  localgpt models show -p work deepseek-chat
  localgpt models ps
  localgpt models pull llama3.2
"""


_refresh_option = click.option(
    "--refresh", is_flag=True, help="Ask Ollama now instead of the 5-minute cache."
)


@click.group(invoke_without_command=True, epilog=EPILOG)
@_refresh_option
@provider_option
@json_option
@click.pass_context
def models(ctx: click.Context, refresh: bool) -> None:
    """List and inspect the models of every provider; pull to Ollama."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, refresh=refresh)


@models.command("list", epilog="""\b
Examples:
  localgpt models list --refresh --json
  localgpt models list --provider work""")
@_refresh_option
@provider_option
@json_option
@pass_app
def list_cmd(app: App, refresh: bool) -> None:
    """List every provider's models: name, size, family, parameters, quantization,
    modified, and the provider (a profile that does not answer is a warning)."""
    catalogs: dict[str, ModelCatalog] = {}
    listed = list_providers(app, refresh, catalogs)
    if app.output.json:  # with each model's capabilities (/api/show, cached like the list)
        for name, m in listed:
            app.output.record({**m.to_record(), "provider": name,
                               "capabilities": _capabilities(catalogs[name], m.name)})
        return
    several = len({name for name, _m in listed}) > 1 or bool(app.settings.profiles)
    rows = [
        [m.name, human_size(m.size) if m.size else "", m.family or "", m.parameters or "",
         m.quantization or "", (m.modified_at or "")[:19].replace("T", " ")]
        + ([name] if several else [])
        for name, m in listed
    ]  # fmt: skip
    columns = ["NAME", "SIZE", "FAMILY", "PARAMS", "QUANT", "MODIFIED"]
    print_table(
        app.output,
        columns + (["PROVIDER"] if several else []),
        rows,
        empty="No models installed. Pull one with: localgpt models pull llama3.2",
    )


def _capabilities(catalog: ModelCatalog, model: str) -> list[str] | None:
    """What the model can do (`vision`, `tools`, …): `models --json | jq` finds a model
    for a task by them. None when the server cannot say (the listing goes on)."""
    from localgpt_cli.errors import LocalGPTError

    try:
        return catalog.show(model).capabilities
    except LocalGPTError:
        return None


def list_providers(app: App, refresh: bool, catalogs: dict[str, ModelCatalog] | None = None,
                   ) -> list[tuple[str, ModelSummary]]:  # fmt: skip
    """The models of the chosen provider (`--provider`), else of every configured one and
    the Ollama at `host` (each one's catalog put in `catalogs`). One that cannot be asked
    is a warning while another answers; when none does, the first failure is the
    command's error."""
    from localgpt_cli.errors import LocalGPTError

    settings = app.settings
    chosen = settings.sources["provider"] == "flag"
    names = [settings.provider] if chosen else list(dict.fromkeys(["ollama", *settings.profiles]))
    listed: list[tuple[str, ModelSummary]] = []
    failures: list[LocalGPTError] = []
    for name in names:
        cache = cache_dir() / ("models.json" if name == "ollama" else f"models-{name}.json")
        try:
            provider = app.provider(name)
            catalog = ModelCatalog(provider, cache)
            found, _cached = catalog.list(refresh=refresh)
            if catalogs is not None:
                catalogs[name] = catalog
            problem = getattr(provider, "problem", lambda: None)()  # listed, not runnable
            if problem is not None:
                app.output.warn("provider_unusable", f"provider {name!r}: {problem}")
        except LocalGPTError as exc:
            failures.append(exc)
            if len(names) > 1:
                app.output.warn("provider_unreachable", f"provider {name!r}: {exc}")
            continue
        listed.extend((name, m) for m in found)
    if failures and len(failures) == len(names):
        raise failures[0]
    return listed


@models.command("show", epilog="Example:\n\n  localgpt models show qwen3 --json | jq "
                "'select(.type==\"model_info\").capabilities'")
@click.argument("name")
@provider_option
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
