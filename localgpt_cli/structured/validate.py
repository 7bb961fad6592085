"""An answer checked against its schema with a real JSON Schema validator (`jsonschema`).

Imported only when a schema is used, so `localgpt --help` and every other chat stay as
fast as before. The validator of a schema is built once per process (`--each` checks
hundreds of answers against one schema), and the message names where the answer breaks
the schema, in the words sent back to the model on the retry.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from localgpt_cli.errors import LocalGPTError


@functools.lru_cache(maxsize=8)
def _validator(text: str) -> Any:
    from jsonschema.validators import validator_for

    schema = json.loads(text)
    return validator_for(schema)(schema)


def check_schema(schema: dict[str, Any], where: str, error: type[LocalGPTError]) -> None:
    """Raise `error` when `schema` is not a JSON Schema (a `type` that does not exist…)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise error(f"{where} is not a valid JSON Schema: {exc.message} (at "
                    f"{_path(exc.absolute_path)}).") from None  # fmt: skip


def check(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(the answer's value, None) when `text` is JSON meeting `schema`, else (None, what
    is wrong: not JSON, broken JSON, or where it breaks the schema)."""
    stripped = text.strip()
    if not stripped:
        return None, "the answer is empty"
    try:
        value = json.loads(stripped)
    except ValueError as exc:
        if stripped[:1] in ("{", "["):
            return None, f"the answer is not valid JSON: {getattr(exc, 'msg', exc)}"
        return None, "the answer is prose, not JSON"
    from jsonschema.exceptions import best_match

    found = best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value))
    if found is None:
        return value, None
    return None, f"at {_path(found.absolute_path)}: {found.message}"


def _path(parts: Any) -> str:
    """`$.tags[0]`: where in the answer (or schema) something is."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
