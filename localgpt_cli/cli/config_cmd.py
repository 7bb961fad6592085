"""`localgpt config`: the effective settings and where each one came from."""

from __future__ import annotations

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.config import SPECS, cache_dir, config_file
from localgpt_cli.render.tables import print_table

EPILOG = """\b
Precedence: flags > environment > config.toml > defaults.
Examples:
  localgpt config
  localgpt --host gpu-box:11434 config --json | jq -r 'select(.key=="host").value'
  LOCALGPT_MODEL=qwen3 localgpt config
"""


@click.command(epilog=EPILOG)
@json_option
@pass_app
def config(app: App) -> None:
    """Print the effective settings, each with its source (flag, env, file, default)."""
    settings = app.settings
    rows = []
    for spec in SPECS:
        value = settings.values.get(spec.key)
        if spec.key == "history.url" and value:
            from localgpt_cli.history.postgres import masked

            value = masked(value)  # the password is never shown
        source = settings.sources[spec.key]
        if spec.key == "history.backend":
            value, source = _effective_backend(app, value, source)
        if app.output.json:
            app.output.record(
                {"type": "setting", "key": spec.key, "value": value, "source": source,
                 "env": spec.env, "help": spec.help}
            )
        shown = ", ".join(value) if isinstance(value, tuple) else value  # [tools.files] lists
        rows.append([spec.key, "" if shown is None else shown, source])
    for profile in settings.profiles.values():  # the key itself is never shown
        record = profile.to_record()
        if app.output.json:
            app.output.record(record)
        key = f", key {record['api_key']}" if record["api_key"] else ""
        model = f", model {profile.default_model}" if profile.default_model else ""
        where = profile.model_path or profile.base_url or settings.host
        rows.append([f"providers.{profile.name}", f"{profile.kind} {where}{model}{key}",
                     profile.source])  # fmt: skip
    paths = [("config_file", str(config_file())), ("cache_dir", str(cache_dir()))]
    for key, value in paths:
        if app.output.json:
            app.output.record({"type": "path", "key": key, "value": value})
        rows.append([key, value, "path"])
    if not app.output.json:
        print_table(app.output, ["SETTING", "VALUE", "SOURCE"], rows)


def _effective_backend(app: App, value: object, source: str) -> tuple[object, str]:
    """history.backend as chat will use it: a history.url alone chooses postgres, and
    showing `sqlite  default` then would send the user looking in the wrong place."""
    from localgpt_cli.config import history_backend
    from localgpt_cli.errors import LocalGPTError

    try:
        backend, _ = history_backend(app.settings)
    except LocalGPTError:
        return value, source  # shown as set; any command that opens the history says why
    if backend == value:
        return value, source
    return backend, f"history.url ({app.settings.sources['history.url']})"
