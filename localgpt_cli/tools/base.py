"""The tool protocol: what a tool is, how its arguments are checked, how it is offered.

A tool failing is part of a conversation, not a crash: `Tool.run` turns every failure
(bad arguments, a refused path, a plugin that raises) into a `ToolError` whose text the
agent loop feeds back to the model so it can correct itself.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localgpt_cli.errors import EXIT_INVALID, LocalGPTError

# Ollama (and the OpenAI-style templates models are trained on) accept these names.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# A group is typed on the command line (`--tools files,web`): short, lower case, no comma.
GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
RESERVED_GROUPS = ("all", "none")
DEFAULT_GROUP = "general"


class ToolError(LocalGPTError):
    """A tool could not do what was asked; the message is written for the model to read."""

    code = "tool_error"
    exit_code = EXIT_INVALID


Handler = Callable[[dict[str, Any]], Any]


@dataclass
class Tool:
    """One callable tool.

    `handler` receives the validated arguments as a dict and returns text (other values
    are rendered as JSON). `examples` are typical user requests: tool selection embeds
    them with the description, so they decide when the tool is offered among many.
    `core` tools are offered on every turn whatever the selection says, as long as
    their `group` is allowed (`chat --tools files,web` keeps only those groups). A
    `preview` tool never acts: its handler returns a `Preview` (tools/preview.py) that
    the user is shown, and the model only learns that it was sent. A `network` tool
    sends data off the machine (web_fetch; a plugin declares it so): once a turn has
    read local files (`reads_local` tools, --file, retrieved passages), it runs only with
    the user's yes on a terminal.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    examples: Sequence[str] = ()
    core: bool = False
    source: str = "builtin"
    group: str = DEFAULT_GROUP
    preview: bool = False
    network: bool = False
    reads_local: bool = False

    def __post_init__(self) -> None:
        check_definition(self)

    def run(self, arguments: Mapping[str, Any] | None) -> str:
        """Validate `arguments`, call the handler, return its text.

        What the handler prints comes first in the text. Anything it raises, SystemExit
        and KeyboardInterrupt included, becomes a ToolError: a plugin's bug must not end
        the user's turn. Only a real Ctrl-C (or SIGTERM) does (see tools/isolation.py).
        """
        return text_of(*self.call(arguments))

    def call(self, arguments: Mapping[str, Any] | None) -> tuple[str, Any]:
        """Validate, call the handler contained; (what it printed, what it returned)."""
        from localgpt_cli.tools.isolation import run_contained

        clean = validate_arguments(self, arguments)
        try:
            outcome = run_contained(self.handler, clean)
        except OSError as exc:  # no temporary file to capture the tool's output in
            raise ToolError(f"{self.name} was not run: cannot capture its output: {exc}") from exc
        printed = outcome.output.rstrip("\n")
        if outcome.error is not None:
            message = self._failure(outcome.error)
            if printed:
                message += f"\nOutput before the failure:\n{printed}"
            raise ToolError(message) from outcome.error
        return printed, outcome.value

    def _failure(self, exc: BaseException) -> str:
        """The text a ToolError carries for whatever the handler raised."""
        if isinstance(exc, ToolError):
            return str(exc)
        if isinstance(exc, LocalGPTError):
            return f"{self.name} failed: {exc}"
        detail = f": {exc}" if str(exc) else ""
        return f"{self.name} failed: {type(exc).__name__}{detail}"

    def to_ollama(self) -> dict[str, Any]:
        """The definition sent in `tools` of /api/chat."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def selection_text(self) -> str:
        """The text embedded for tool selection: name, description and example requests."""
        return " | ".join([f"{self.name} — {self.description}", *self.examples])


def describe(tool: Tool) -> dict[str, Any]:
    """The record `localgpt tools list/show --json` prints for a tool."""
    return {
        "type": "tool",
        "name": tool.name,
        "description": tool.description,
        "source": tool.source,
        "group": tool.group,
        "core": tool.core,
        "preview": tool.preview,
        "network": tool.network,
        "parameters": tool.parameters,
    }


def cut(text: str, max_chars: int, what: str) -> str:
    """`text` up to `max_chars`, then a marker saying how much was shown of what."""
    if len(text) <= max_chars:
        return text
    marker = f"[… truncated: showed {max_chars} of {len(text)} characters, {what}]"
    return f"{text[:max_chars]}\n{marker}"


def text_of(printed: str, value: Any) -> str:
    """A tool's text for the model: what its handler printed, then what it returned."""
    result = as_text(value)
    return f"{printed}\n{result}" if printed and result else printed or result


def as_text(value: Any) -> str:
    """Render a handler's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def check_definition(tool: Tool) -> None:
    """Refuse a tool whose definition Ollama or the validator could not use."""
    if not isinstance(tool.name, str) or not TOOL_NAME.match(tool.name):
        raise ValueError(
            f"tool name {tool.name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
        )
    if not isinstance(tool.description, str):
        raise ValueError(f"tool {tool.name!r}: description must be a string")
    params = tool.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ValueError(f"tool {tool.name!r}: parameters must be a JSON Schema of type object")
    if not isinstance(params.get("properties", {}), dict):
        raise ValueError(f"tool {tool.name!r}: parameters.properties must be an object")
    if not callable(tool.handler):
        raise ValueError(f"tool {tool.name!r}: handler is not callable")
    if isinstance(tool.examples, str):
        raise ValueError(f"tool {tool.name!r}: examples must be a list of strings")
    if not isinstance(tool.group, str) or not GROUP_NAME.match(tool.group) or (
        tool.group in RESERVED_GROUPS
    ):
        raise ValueError(
            f"tool {tool.name!r}: group {tool.group!r} is invalid: use 1-32 lower-case "
            f"letters, digits, '_' or '-' (not {' or '.join(RESERVED_GROUPS)})"
        )


_TYPE_WORDS = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean (true or false)",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _matches(value: Any, kind: str) -> tuple[bool, Any]:
    """Does `value` have JSON type `kind`? Returns (ok, value normalised to that type)."""
    if kind == "string":
        return isinstance(value, str), value
    if kind == "boolean":
        return isinstance(value, bool), value
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        # JSON Schema counts 5.0 as an integer; hand the tool a real int.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return True, int(value)
        return False, value
    if kind == "number":
        if isinstance(value, bool):
            return False, value
        return isinstance(value, (int, float)) and math.isfinite(value), value
    if kind == "array":
        return isinstance(value, list), value
    if kind == "object":
        return isinstance(value, dict), value
    if kind == "null":
        return value is None, value
    return True, value  # a type this subset does not know: do not block the call


def _check(value: Any, schema: Mapping[str, Any], path: str) -> Any:
    """Check one value against a schema of the supported subset; return it normalised."""
    where = f"argument '{path}'"
    kinds = schema.get("type")
    if kinds is not None:
        options = [kinds] if isinstance(kinds, str) else list(kinds)
        for kind in options:
            ok, normalised = _matches(value, kind)
            if ok:
                value = normalised
                break
        else:
            wanted = " or ".join(_TYPE_WORDS.get(k, k) for k in options)
            raise ToolError(f"{where} must be {wanted}, got {_type_name(value)} {_show(value)}")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        raise ToolError(f"{where} must be one of {allowed}, got {_show(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"{where} must be at least {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolError(f"{where} must be at most {schema['maximum']}, got {value}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value = [_check(item, schema["items"], f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        value = _check_object(value, schema, prefix=f"{path}.")
    return value


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], prefix: str) -> dict:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            raise ToolError(f"missing required argument '{prefix}{name}'")
    extra = schema.get("additionalProperties", True)
    result: dict[str, Any] = {}
    for name, item in value.items():
        if name in properties:
            result[name] = _check(item, properties[name], f"{prefix}{name}")
        elif extra is False:
            expected = ", ".join(properties) or "none"
            raise ToolError(f"unknown argument '{prefix}{name}' (expected: {expected})")
        elif isinstance(extra, Mapping):
            result[name] = _check(item, extra, f"{prefix}{name}")
        else:
            result[name] = item
    return result


def validate_arguments(tool: Tool, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check a model's arguments against the tool's schema; return them normalised.

    Supports the subset tool schemas use: object (properties, required,
    additionalProperties), string, number, integer, boolean, array (items), enum,
    minimum/maximum. The messages name the argument, because the model reads them.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ToolError(f"arguments for {tool.name} must be an object, got {_type_name(arguments)}")
    return _check_object(dict(arguments), tool.parameters, prefix="")
