"""`localgpt templates`: list, show, locate and edit the prompts kept for `chat -t NAME`."""

from __future__ import annotations

import click

from localgpt_cli.cli.app import App, json_option, pass_app

EPILOG = """\b
A template is TOML: system, prompt (with $input and $NAME parameters), model, options,
schema, tools, collection, and [defaults] for the parameters.
Examples:
  localgpt templates list
  localgpt templates show triage
  localgpt templates edit summarize     # $EDITOR; a new file starts from an example
  cat "$(localgpt templates path triage)"
"""

SKELETON = '''# localgpt template: chat -t NAME [-P name value]… [PROMPT]
system = "You are a concise assistant."
prompt = "Summarise in $lang:\\n\\n$input"
# model = "qwen3"
# schema = "title, summary"
# tools = "none"

[defaults]
lang = "English"
'''


@click.group(epilog=EPILOG)
def templates() -> None:
    """Prompts kept for reuse: chat -t NAME (templates/NAME.toml in the config folder)."""


@templates.command("list")
@json_option
@pass_app
def list_templates(app: App) -> None:
    """List the templates, one per line (with --json: name and path records)."""
    from localgpt_cli.templates import names, template_record

    for name in names():
        if app.output.json:
            app.output.record(template_record(name))
        else:
            app.output.stdout.write(f"{name}\n")


@templates.command("show")
@click.argument("name")
@pass_app
def show(app: App, name: str) -> None:
    """Print template NAME's file, after checking that it can be used."""
    from localgpt_cli.templates import load_template

    template = load_template(name)
    app.output.stdout.write(template.path.read_text(encoding="utf-8"))


@templates.command("path")
@click.argument("name")
@pass_app
def path(app: App, name: str) -> None:
    """Print where template NAME is (or would be) kept."""
    from localgpt_cli.templates import template_path

    app.output.stdout.write(f"{template_path(name)}\n")


@templates.command("edit")
@click.argument("name")
@pass_app
def edit(app: App, name: str) -> None:
    """Open template NAME in $EDITOR (a new one starts from an example), then check it."""
    import os
    import shlex
    import subprocess

    from localgpt_cli.errors import UsageError
    from localgpt_cli.templates import load_template, template_path

    file = template_path(name)
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(SKELETON, encoding="utf-8")
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise UsageError("Neither $VISUAL nor $EDITOR is set.",
                         hint=f"Set one, or edit {file} directly.")
    if subprocess.run([*shlex.split(editor), str(file)], check=False).returncode != 0:
        raise UsageError(f"The editor ({editor}) failed; {file} is as it left it.")
    load_template(name)  # a template that cannot be used is said now, not at the next chat
