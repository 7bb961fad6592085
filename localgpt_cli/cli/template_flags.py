"""chat's template flags (`-t NAME`, `-P name value`, `--save NAME`) and how a template's
values become chat's flags: a flag given on the command line wins, the template fills
what was not given (templates.py reads the file)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.chat_flags import ChatFlags

if TYPE_CHECKING:
    from localgpt_cli.cli.app import App
    from localgpt_cli.templates import Template

_OPTIONS = (
    click.option("-t", "--template", "template", metavar="NAME",
                 help="Start from template NAME (templates/NAME.toml in the config folder); "
                      "flags given here override it."),
    click.option("-P", "--param", "params", type=(str, str), multiple=True,
                 metavar="NAME VALUE", help="A template parameter $NAME (repeatable)."),
    click.option("--save", "save", metavar="NAME",
                 help="Save these flags and PROMPT as template NAME instead of asking."),
)  # fmt: skip

_FLAG_KEYS = ("model", "system", "schema", "tools", "collection")  # template key = flag


def template_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """chat's template options, as one decorator."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def with_template(flags: ChatFlags) -> tuple[ChatFlags, Template | None]:
    """The flags with template -t's values filled in where the command line gave none
    (its options first, so a -o given here wins), and the template."""
    if flags.template is None:
        if flags.params:
            raise click.UsageError("-P sets a template's parameter; name the template with -t.")
        return flags, None
    from localgpt_cli.templates import load_template, system_text

    template = load_template(flags.template)
    given = {key: getattr(template, key) for key in _FLAG_KEYS
             if getattr(flags, key) is None and getattr(template, key) is not None}
    if "system" in given:
        given["system"] = system_text(template, dict(flags.params))
    if "schema" in given and flags.schema_multi is not None:
        del given["schema"]  # --schema-multi on the command line replaces it
    options = tuple((k, v if isinstance(v, str) else json.dumps(v))
                    for k, v in template.options.items())  # fmt: skip
    return dataclasses.replace(flags, **given, options=options + flags.options), template


def save_from_flags(app: App, flags: ChatFlags) -> None:
    """`chat --save NAME …`: the template these flags make, written; nothing is asked."""
    from localgpt_cli.llm.options import parse_options
    from localgpt_cli.templates import save_template, template_record

    parse_options(flags.options)  # a bad -o is refused here, not when the template is used
    if flags.schema_multi:
        raise click.UsageError("--save keeps --schema, not --schema-multi: save the schema "
                               "with --schema and give --schema-multi when you use it.")
    values: dict[str, Any] = {key: getattr(flags, key) for key in _FLAG_KEYS}
    values["prompt"] = " ".join(flags.prompt).strip() or None
    values["options"] = dict(flags.options)
    path = save_template(flags.save or "", values)
    if app.output.json:
        app.output.record(template_record(flags.save or ""))
    else:
        app.output.info(f"Saved template {flags.save!r} to {path}.")
