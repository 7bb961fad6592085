"""What `--schema SPEC` / `--schema-multi SPEC` ask for: SPEC read as a file, inline JSON
or the concise form, and the schema sent to the model.

`--schema-multi` asks for an array of such objects. The request still carries an object
(`{"items": [...]}`): OpenAI's structured outputs and several grammar builders accept
only an object at the top; the array is unwrapped before it is printed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localgpt_cli.errors import InvalidInput, UsageError

MULTI_KEY = "items"


@dataclass(frozen=True)
class StructuredSpec:
    """The schema a turn's answer must meet: `schema` is what is sent and validated,
    `multi` says the printed value is its `items` array."""

    schema: dict[str, Any]
    multi: bool = False

    def result(self, value: Any) -> Any:
        """The value a script reads: the array itself for --schema-multi."""
        return value[MULTI_KEY] if self.multi else value


def read_spec(spec: str, flag: str = "--schema") -> dict[str, Any]:
    """The JSON Schema SPEC names: inline JSON (starts with `{`), a file, else the concise
    form. Bad inline JSON or concise form: UsageError (exit 2); a file that is not a JSON
    Schema: InvalidInput naming the file and line (exit 6)."""
    from localgpt_cli.structured.concise import concise_schema
    from localgpt_cli.structured.validate import check_schema

    text = spec.strip()
    error: type[UsageError] | type[InvalidInput] = UsageError  # a flag: exit 2
    if text.startswith("{"):
        where = f"{flag}'s inline JSON"
        schema = _parse(text, where, error)
    elif _is_file(text):
        path = Path(text).expanduser()
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{flag}: cannot read {path}: {exc}") from exc
        where, error = str(path), InvalidInput  # a file: exit 6
        schema = _parse(content, where, error)
    else:
        return concise_schema(spec, flag)
    check_schema(schema, where, error)
    return schema


def structured_spec(spec: str | None, multi: str | None) -> StructuredSpec | None:
    """The chat's StructuredSpec from --schema / --schema-multi (at most one of them)."""
    if spec is not None and multi is not None:
        raise UsageError("Use either --schema or --schema-multi, not both.")
    if multi is not None:
        return StructuredSpec(multi_schema(read_spec(multi, "--schema-multi")), multi=True)
    return None if spec is None else StructuredSpec(read_spec(spec))


def multi_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The object holding an array of `schema`, what --schema-multi sends."""
    return {"type": "object", "properties": {MULTI_KEY: {"type": "array", "items": schema}},
            "required": [MULTI_KEY]}  # fmt: skip


def _is_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).expanduser().is_file()
    except OSError:  # a name too long to be a path: the concise form
        return False


def _parse(text: str, where: str, error: type[UsageError] | type[InvalidInput]) -> Any:
    try:
        value = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        at = f" (line {line}, column {getattr(exc, 'colno', '?')})" if line else ""
        raise error(f"{where} is not valid JSON{at}: {getattr(exc, 'msg', exc)}.",
                    hint="Give a JSON Schema, or the concise form 'title, severity int'."
                    ) from None  # fmt: skip
    if not isinstance(value, dict):
        raise error(f"{where} is JSON but not a JSON Schema object.",
                    hint='Example: {"type": "object", "properties": {"title": '
                         '{"type": "string"}}}.')  # fmt: skip
    return value
