"""`--functions FILE.py`: every public function defined in a file becomes a tool.

The quickest way to give a model a new ability is to write a typed Python function. The
schema comes from the signature (type hints -> JSON Schema; Optional or a default -> not
required; Literal -> enum; list[int] -> array of integers; Annotated[int, "text"] -> a
described parameter) and the description from the docstring, so the function is its own
documentation. Anything that cannot be described is a UsageError naming the file and
line: the user passed the file on the command line and must fix it there.
"""

from __future__ import annotations

import collections.abc
import hashlib
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from localgpt_cli.errors import UsageError
from localgpt_cli.tools.base import Tool

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_HINT = "use str, int, float, bool, list[...], dict, Literal[...] or Optional[...]"
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Examples?|Returns?|Raises)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:\w+\s+)?(\w+)\s*:\s*(.*)$")


class _Unsupported(Exception):
    """A type hint with no JSON Schema counterpart (turned into a UsageError)."""


def _schema_for(hint: Any) -> tuple[dict[str, Any], bool]:
    """JSON Schema for a type hint, and whether None is allowed (Optional)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema, optional = _schema_for(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema = {**schema, "description": notes[0]}
        return schema, optional
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise _Unsupported(f"a union of several types ({hint})")
        schema, _ = _schema_for(rest[0])
        return schema, True
    if origin is Literal:
        kinds = {_SCALARS.get(type(a)) for a in args}
        if len(kinds) != 1 or None in kinds:
            raise _Unsupported(f"a Literal mixing types or holding non-scalars ({hint})")
        return {"type": kinds.pop(), "enum": list(args)}, False
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}, False
    if hint is Any:
        return {}, False
    if hint in (list, collections.abc.Sequence) or origin in (list, collections.abc.Sequence):
        array: dict[str, Any] = {"type": "array"}
        if args:
            array["items"], _ = _schema_for(args[0])
        return array, False
    if hint is dict or origin is dict:
        return {"type": "object"}, False
    raise _Unsupported(f"type {getattr(hint, '__name__', hint)!s}")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str], list[str]]:
    """(first paragraph, parameter descriptions, example requests) from a docstring."""
    first: list[str] = []
    for line in doc.strip().splitlines():
        if not line.strip() or _SECTION.match(line.strip()):
            break
        first.append(line.strip())
    params: dict[str, str] = {}
    examples: list[str] = []
    section = ""
    for line in doc.splitlines():
        stripped = line.strip()
        header = _SECTION.match(stripped)
        if header:
            section = header.group(1).lower()
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2).strip()
        elif section in ("args", "arguments", "parameters", "params") and stripped:
            arg = _ARG_LINE.match(stripped)
            if arg and line.startswith((" ", "\t")) and arg.group(1) not in params:
                params[arg.group(1)] = arg.group(2).strip()
        elif section in ("example", "examples") and stripped:
            examples.append(stripped.lstrip("-* ").strip())
    return " ".join(first), params, examples


def _tool_from_function(fn: Any, path: Path) -> Tool:
    line = fn.__code__.co_firstlineno
    where = f"{path}:{line}: function {fn.__name__}"
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UsageError(f"{where}: cannot resolve its type hints: {exc}.") from None
    summary, param_docs, examples = _docstring_parts(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    fill_none: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise UsageError(
                f"{where}: parameter {name!r} is *args, **kwargs or positional-only; "
                "a model can only pass named arguments."
            )
        has_default = param.default is not param.empty
        if name in hints:
            hint = hints[name]
        elif has_default and type(param.default) in _SCALARS:
            hint = type(param.default)
        else:
            raise UsageError(f"{where}: parameter {name!r} has no type hint; {_HINT}.")
        try:
            schema, optional = _schema_for(hint)
        except _Unsupported as exc:
            raise UsageError(f"{where}: parameter {name!r} has {exc}; {_HINT}.") from None
        if name in param_docs and "description" not in schema:
            schema["description"] = param_docs[name]
        if has_default and isinstance(param.default, (str, int, float, bool, list)):
            schema["default"] = param.default
        if not has_default and optional:
            fill_none.append(name)
        if not has_default and not optional:
            required.append(name)
        properties[name] = schema

    def handler(arguments: dict[str, Any]) -> Any:
        return fn(**{**dict.fromkeys(fill_none), **arguments})

    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        parameters["required"] = required
    try:
        return Tool(
            name=fn.__name__,
            description=summary or fn.__name__.replace("_", " "),
            parameters=parameters,
            handler=handler,
            examples=tuple(examples),
            source=f"file:{path}",
            group="functions",
        )
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}.") from None


def _error_line(exc: BaseException, path: Path) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def load_functions_file(path: str | Path) -> list[Tool]:
    """Import a Python file and make each public function defined in it a tool."""
    file = Path(path).expanduser().resolve()
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"Cannot read functions file {path}: {exc}.") from None
    try:
        code = compile(source, str(file), "exec")
    except SyntaxError as exc:
        raise UsageError(
            f"{file}:{exc.lineno}: syntax error in functions file: {exc.msg}."
        ) from None
    name = "localgpt_functions_" + hashlib.sha1(str(file).encode()).hexdigest()[:10]
    module = types.ModuleType(name)
    module.__file__ = str(file)
    sys.modules[name] = module  # dataclasses and typing look their module up here
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        sys.modules.pop(name, None)
        line = _error_line(exc, file)
        at = f"{file}:{line}" if line else str(file)
        raise UsageError(
            f"{at}: loading the functions file failed: {type(exc).__name__}: {exc}."
        ) from None
    tools = [
        _tool_from_function(obj, file)
        for attr, obj in vars(module).items()
        if not attr.startswith("_") and inspect.isfunction(obj) and obj.__module__ == name
    ]
    if not tools:
        raise UsageError(f"{file}: defines no public function to offer as a tool.")
    return tools
