"""The concise schema form -> a JSON Schema: `'title, severity int, tags: short labels'`.

Typing a JSON Schema on a command line is a chore, so `--schema` also takes the form `llm`
made familiar: fields separated by commas (or by newlines, when there are any, so a
description may hold a comma), each a name, an optional type (`str` default, `int`,
`float`, `bool`) and an optional description after a colon. Every field is required: a
script reading `.severity` wants it there.
"""

from __future__ import annotations

import re
from typing import Any

from localgpt_cli.errors import UsageError

TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_FIELD = re.compile(r"(?P<name>[A-Za-z_][\w-]*)(?:\s+(?P<type>\S+))?")


def concise_schema(spec: str, flag: str = "--schema") -> dict[str, Any]:
    """The JSON Schema (an object of required fields) the concise form `spec` means;
    UsageError naming the field that cannot be read."""
    separator = "\n" if "\n" in spec.strip() else ","
    properties: dict[str, Any] = {}
    for number, part in enumerate(spec.strip().split(separator), start=1):
        part = part.strip()
        if not part:
            continue
        head, colon, description = part.partition(":")
        match = _FIELD.fullmatch(head.strip())
        if match is None:
            raise UsageError(f"{flag}: field {number} ({part!r}) is not `NAME [TYPE][: "
                             "description]`.", hint="Example: 'title, severity int, "
                             "tags: short labels'.")
        kind = match.group("type") or "str"
        if kind not in TYPES:
            raise UsageError(f"{flag}: field {match.group('name')!r} has type {kind!r}, "
                             f"which is not one of {', '.join(TYPES)}.",
                             hint="Or give a JSON Schema (a file or inline JSON).")
        field: dict[str, Any] = {"type": TYPES[kind]}
        if colon and description.strip():
            field["description"] = description.strip()
        properties[match.group("name")] = field
    if not properties:
        raise UsageError(f"{flag}: the schema names no field.",
                         hint="Example: 'title, severity int'.")
    return {"type": "object", "properties": properties, "required": list(properties)}
