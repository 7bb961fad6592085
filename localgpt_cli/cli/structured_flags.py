"""chat's flags for answers a script can parse (`--schema`, `--schema-multi`), as one
decorator, kept apart from chat.py so the command module stays its list of flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

_OPTIONS = (
    click.option("--schema", "schema", metavar="SPEC",
                 help="Answer with JSON meeting SPEC, validated (exit 6 if it never does): "
                      "a JSON Schema file, inline JSON, or fields like 'title, severity "
                      "int, tags: short labels'. Tools are off unless asked for."),
    click.option("--schema-multi", "schema_multi", metavar="SPEC",
                 help="Like --schema, for an array of such objects (extraction)."),
    click.option("--each", is_flag=True,
                 help="With --schema: answer each stdin line (PROMPT the instruction), one "
                      "JSON record per input in order; failures are error records (exit 5)."),
    click.option("-0", "--null", "null", is_flag=True,
                 help="With --each: inputs are separated by NUL bytes (find -print0)."),
)  # fmt: skip


def structured_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """chat's structured-output options, as one decorator."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command
