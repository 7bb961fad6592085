"""Templates: a prompt kept for reuse, `chat -t NAME`, in the XDG config folder
(`~/.config/localgpt/templates/NAME.toml`).

A template is a TOML file of the flags a chat would otherwise repeat: `system`, `prompt`
(with `$input`, the PROMPT argument or piped stdin, and named parameters `$name` filled by
`-P name value` or the `[defaults]` table), `model`, `options` (a table, as `-o`),
`schema` (a --schema SPEC), `tools` (groups, as --tools) and `collection`. Every problem is
one line naming the file (and its line where there is one): a template that cannot be read
is the file's fault (exit 6), a missing template or parameter the command line's (exit 2).
"""

from __future__ import annotations

import json
import re
import string
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localgpt_cli.errors import InvalidInput, UsageError

KEYS = ("system", "prompt", "model", "options", "schema", "tools", "collection", "defaults")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Template:
    """One template file, read and checked."""

    name: str
    path: Path
    system: str | None = None
    prompt: str | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    schema: str | None = None
    tools: str | None = None
    collection: str | None = None
    defaults: dict[str, str] = field(default_factory=dict)

    def parameters(self) -> set[str]:
        """The `$name`s its system and prompt use (`$input` included)."""
        found: set[str] = set()
        for text in (self.system, self.prompt):
            if text:
                found |= {m.group("named") or m.group("braced") for m in
                          string.Template.pattern.finditer(text)
                          if m.group("named") or m.group("braced")}  # fmt: skip
        return found


def templates_dir() -> Path:
    from localgpt_cli.config import config_dir

    return config_dir() / "templates"


def template_path(name: str) -> Path:
    """Where template NAME lives (whether or not it exists); a name that is not a plain
    file name is a usage error."""
    if not _NAME.fullmatch(name):
        raise UsageError(f"Template name {name!r} is not a plain name (letters, digits, "
                         "`_`, `-`, `.`).")
    return templates_dir() / f"{name}.toml"


def template_record(name: str) -> dict[str, str]:
    """Template NAME as a record: what `templates list --json` prints for each template
    and `chat --save NAME --json` for the one it wrote."""
    return {"type": "template", "name": name, "path": str(template_path(name))}


def names() -> list[str]:
    folder = templates_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def load_template(name: str) -> Template:
    """Template NAME, or one line: UsageError when it does not exist, InvalidInput naming
    the file and line when it is not valid TOML or holds a key or value it cannot."""
    path = template_path(name)
    if not path.is_file():
        known = ", ".join(names()) or "none yet"
        raise UsageError(f"Template {name!r} does not exist ({path}).",
                         hint=f"Templates: {known}. Save one with chat --save {name} …")
    text = _read(path)
    data = _parse(text, path)
    for key, value in data.items():
        where = f"{path}:{_line(text, key)}"
        if key not in KEYS:
            raise InvalidInput(f"{where}: unknown key {key!r}.",
                               hint=f"A template holds {', '.join(KEYS)}.")
        if key in ("options", "defaults") and not isinstance(value, dict):
            raise InvalidInput(f"{where}: {key} must be a table ([{key}]).")
        if key == "schema" and isinstance(value, dict):
            data[key] = json.dumps(value)
        elif key not in ("options", "defaults") and not isinstance(value, str):
            raise InvalidInput(f"{where}: {key} must be a string.")
    defaults = {str(k): str(v) for k, v in data.pop("defaults", {}).items()}
    return Template(name=name, path=path, defaults=defaults, **data)


def fill(template: Template, params: dict[str, str], words: str,
         piped: str | None) -> tuple[str, str | None]:  # fmt: skip
    """(the question, the piped text still to attach) from the template's prompt.

    `$input` is the PROMPT words, else the piped text (then used up); without `$input` in
    the template the PROMPT words follow its prompt and stdin is attached as usual."""
    used = template.parameters()
    unknown = sorted(set(params) - used)
    if unknown:
        raise UsageError(f"-P {unknown[0]}: template {template.name!r} has no parameter "
                         f"${unknown[0]} ({template.path}).",
                         hint=f"Its parameters: {', '.join(sorted(used - {'input'})) or 'none'}.")
    values = {**template.defaults, **params}
    if "input" in used:
        values["input"], piped = (words, piped) if words else ((piped or "").rstrip(), None)
    missing = sorted(used - set(values))
    if missing:
        raise UsageError(f"Template {template.name!r} needs ${missing[0]} ({template.path}).",
                         hint=f"Give it with -P {missing[0]} VALUE.")
    prompt = string.Template(template.prompt or "").safe_substitute(values)
    if words and "input" not in used:
        prompt = f"{prompt}\n\n{words}" if prompt else words
    return prompt, piped


def system_text(template: Template, params: dict[str, str]) -> str | None:
    if template.system is None:
        return None
    return string.Template(template.system).safe_substitute({**template.defaults, **params})


def save_template(name: str, values: dict[str, Any]) -> Path:
    """Write template NAME from `values` (the keys of KEYS that are set); returns its path."""
    path = template_path(name)
    lines, tables = [], []
    for key in KEYS:
        value = values.get(key)
        if value in (None, {}, ""):
            continue
        if isinstance(value, dict):
            tables.append(f"\n[{key}]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in value.items()))
        else:
            lines.append(f"{key} = {_toml(value)}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines) + "".join(tables), encoding="utf-8")
    return path


def _toml(value: Any) -> str:
    """A TOML value: JSON's strings and numbers are TOML's."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read the template: {exc}.") from exc


def _parse(text: str, path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # "… (at line 3, column 9)"
        found = re.search(r"at line (\d+)", str(exc))
        where = f"{path}:{found.group(1)}" if found else str(path)
        raise InvalidInput(f"{where}: the template is not valid TOML: {exc}.",
                           hint="Fix it: localgpt templates edit NAME.") from None


def _line(text: str, key: str) -> int:
    """The line that sets `key` (a table header or `key =`), for the message."""
    pattern = re.compile(rf"^\s*(\[{re.escape(key)}\]|{re.escape(key)}\s*=)")
    return next((n for n, line in enumerate(text.splitlines(), 1) if pattern.match(line)), 1)
