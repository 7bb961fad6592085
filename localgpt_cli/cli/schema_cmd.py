"""`localgpt schema`: the JSON Schema a `--schema` SPEC means, to save and edit."""

from __future__ import annotations

import click

from localgpt_cli.cli.app import App, json_option, pass_app

EPILOG = """\b
Examples:
  localgpt schema 'title, severity int, tags: short labels'
  localgpt schema 'name, age int' > person.json   # then: chat --schema person.json
  localgpt schema --multi 'name, role'            # what --schema-multi sends
  localgpt schema --json 'title' | jq -c .properties
"""


@click.command(epilog=EPILOG)
@click.argument("spec")
@click.option("--multi", is_flag=True, help="The schema --schema-multi sends (an array).")
@json_option
@pass_app
def schema(app: App, spec: str, multi: bool) -> None:
    """Print the JSON Schema SPEC means: the concise form ('title, severity int'), a
    schema file or inline JSON, checked. Types: str (default), int, float, bool; a
    description after a colon."""
    import json

    from localgpt_cli.structured.spec import multi_schema, read_spec

    value = read_spec(spec, "--schema-multi" if multi else "schema")
    if multi:
        value = multi_schema(value)
    if app.output.json:  # one line, like every record
        app.output.record(value)
    else:  # indented, to be saved and edited
        app.output.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
