"""The JSON Schemas the stages' structured outputs must meet, and a checker for them.

The schemas ship as package data (schemas/*.json) so a user can read exactly what each
stage asks the model for. Validation is a small checker for the subset of JSON Schema
those files use (type, enum, required, properties, additionalProperties, items, min/max,
pattern, local $ref): jsonschema is a test-only dependency, and a stage must not pull it
into every chat. tests/test_answer_schema.py checks this checker against jsonschema.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from importlib import resources
from typing import Any

ID_PATTERN = "^P[0-9]+$"  # a kept passage's id as the model sees it: P1, P2, ...

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float), "null": (type(None),),
}  # fmt: skip


@functools.cache
def _load(name: str) -> str:
    folder = resources.files(__package__) / "schemas"
    return (folder / f"{name}.schema.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    """The shipped schema `name` (shape, audit, rerank, gate, condensed), a fresh copy."""
    schema: dict[str, Any] = json.loads(_load(name))
    return schema


def inline(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its local `$ref`s replaced by what they name, for the request:
    the server turns the schema into a grammar, and the plainer it is the fewer servers
    refuse it."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.rsplit("/", 1)[1]])
            return {k: walk(v) for k, v in node.items() if k not in ("$defs", "$schema", "$id")}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def with_ids(schema: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """The inlined schema with every passage id restricted to `ids`, so a server that
    constrains its output to the schema cannot cite a passage that does not exist (the
    answer is still checked: not every server constrains)."""
    out = copy.deepcopy(inline(schema))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("pattern") == ID_PATTERN:
                node.pop("pattern")
                node["enum"] = list(ids)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


def problem(instance: Any, schema: dict[str, Any]) -> str | None:
    """The first way `instance` breaks `schema` (`at $.facts[0]: …`), or None."""
    return _check(instance, schema, schema, "$")


def _check(value: Any, node: dict[str, Any], root: dict[str, Any], at: str) -> str | None:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _check(value, root["$defs"][ref.rsplit("/", 1)[1]], root, at)
    if "enum" in node and value not in node["enum"]:
        return f"at {at}: {value!r} is not one of {node['enum']}"
    kind = node.get("type")
    if kind is not None:
        ok = _TYPES[kind]
        if not isinstance(value, ok) or (isinstance(value, bool) and bool not in ok):
            return f"at {at}: expected {kind}, got {type(value).__name__}"
    if isinstance(value, str):
        return _check_string(value, node, at)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and not node.get("minimum", value) <= value <= node.get("maximum", value):
        return f"at {at}: {value} is out of range"
    if isinstance(value, list):
        return _check_array(value, node, root, at)
    if isinstance(value, dict):
        return _check_object(value, node, root, at)
    return None


def _check_string(value: str, node: dict[str, Any], at: str) -> str | None:
    if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
        return f"at {at}: a string of {len(value)} characters is out of bounds"
    pattern = node.get("pattern")
    if pattern and not re.search(pattern, value):
        return f"at {at}: {value!r} does not match {pattern}"
    return None


def _check_array(value: list[Any], node: dict[str, Any], root: dict[str, Any],
                 at: str) -> str | None:  # fmt: skip
    if len(value) < node.get("minItems", 0) or len(value) > node.get("maxItems", len(value)):
        return f"at {at}: {len(value)} items is out of bounds"
    items = node.get("items")
    if not isinstance(items, dict):
        return None
    for i, item in enumerate(value):
        found = _check(item, items, root, f"{at}[{i}]")
        if found:
            return found
    return None


def _check_object(value: dict[str, Any], node: dict[str, Any], root: dict[str, Any],
                  at: str) -> str | None:  # fmt: skip
    for key in node.get("required", ()):
        if key not in value:
            return f"at {at}: {key!r} is missing"
    properties = node.get("properties", {})
    if node.get("additionalProperties") is False:
        extra = sorted(set(value) - set(properties))
        if extra:
            return f"at {at}: unexpected {extra[0]!r}"
    for key, sub in properties.items():
        if key in value:
            found = _check(value[key], sub, root, f"{at}.{key}")
            if found:
                return found
    return None
