"""Structured output (`format`) for the stand-in Ollama server.

Ollama's /api/chat takes `format`: "json" or a JSON Schema object, and answers with the
JSON as text in `message.content` (constrained decoding: a real model cannot break the
schema, but a server without the constraint, or a model running out of tokens, can).
The stand-in answers a format request with an instance of the schema built
deterministically from the request: every string from the request's latest question,
every array of passage verdicts with one item per passage id the schema allows, the
first value of every enum, the minimum of every number, `false` for every boolean.
`FORMAT_MODES` are the faults tests ask for instead: prose, broken JSON, JSON that breaks
the schema, citations of passages that do not exist, nothing, or a late answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

FORMAT_MODES = ("valid", "prose", "invalid_json", "schema", "wrong_citations", "empty",
                "timeout")  # fmt: skip
INVALID_FORMAT = 'invalid format: expected "json" or a valid JSON schema'
WRONG_ID = "P999"


def valid_format(fmt: Any) -> bool:
    return fmt == "json" or (isinstance(fmt, dict) and fmt.get("type") in (None, "object"))


def latest_question(body: dict[str, Any]) -> str:
    """The request's question: after `Latest question:` or `Question:` in the last user
    message, else that message's first line."""
    users = [m.get("content") or "" for m in body.get("messages") or [] if m.get("role") == "user"]
    text = users[-1] if users else ""
    match = re.search(r"(?:Latest question|Question):\s*(.+)", text)
    line = (match.group(1) if match else text).strip().splitlines()
    return line[0].strip() if line else "question"


def instance(schema: dict[str, Any], text: str, wrong_ids: bool = False) -> Any:
    """A value meeting `schema` (the subset ollama requests use), built from `text`."""
    if "enum" in schema:
        return WRONG_ID if wrong_ids and _is_id_enum(schema) else schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: instance(v, text, wrong_ids) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        items = schema.get("items", {})
        id_enum = (items.get("properties") or {}).get("id", {}).get("enum")
        if id_enum:  # one verdict per passage, in the order the request lists them
            return [{**instance(items, text, wrong_ids),
                     "id": WRONG_ID if wrong_ids else i} for i in id_enum]  # fmt: skip
        return [instance(items, text, wrong_ids) for _ in range(max(schema.get("minItems", 1), 1))]
    if kind == "string":
        value = text[: schema.get("maxLength", len(text))]
        return value.ljust(schema.get("minLength", 0), "x")
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def _is_id_enum(schema: dict[str, Any]) -> bool:
    return all(isinstance(v, str) and re.fullmatch(r"P\d+", v) for v in schema["enum"])


def structured_content(body: dict[str, Any], mode: str) -> str:
    """The `message.content` of a format request answered in `mode`."""
    fmt = body.get("format")
    schema = fmt if isinstance(fmt, dict) else {"type": "object", "properties": {}}
    text = latest_question(body)
    if mode == "prose":
        return "Sure! The passages talk about several things that relate to your question."
    if mode == "invalid_json":
        return '{"query": "' + text[:20]  # cut off mid-string, as when num_predict runs out
    if mode == "schema":
        return json.dumps({"answer": text})
    if mode == "empty":
        return ""
    return json.dumps(instance(schema, text, wrong_ids=mode == "wrong_citations"))
