"""Reading config.toml: its tables flattened into the dotted keys of `config.SPECS`.

Kept apart from config.py (which resolves flags > environment > file > defaults) because
the file's shape has rules of its own: `[rag]`, `[memory]` and `[history]` tables hold
settings, `[tools] groups` may be a list, `[providers.NAME]` tables are profiles, and any
other key is refused so that a typo is not silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from localgpt_cli.errors import InvalidInput


def load_file(path: Path, known: Collection[str]) -> dict[str, Any]:
    if not path.exists():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError) as exc:
        raise InvalidInput(
            f"Cannot read config file {path}: {exc}.", hint="Fix or remove the file."
        ) from None
    data = flatten(tools_table(data, path), known)
    unknown = sorted(set(data) - set(known) - {"providers"})
    if unknown:
        raise InvalidInput(
            f"Unknown setting(s) in {path}: {', '.join(unknown)}.",
            hint=f"Known settings: {', '.join(known)}.",
        )
    return data


def tools_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """`[tools] groups = ["files", "knowledge"]` (or "files,knowledge") as `tools.groups`,
    and `[tools.files]` lists of paths as `tools.files.deny`, `.allow` and `.folders`."""
    table = data.pop("tools", None)
    if table is None:
        return data
    if not isinstance(table, dict) or set(table) - {"groups", "files"}:
        raise InvalidInput(f"`tools` in {path} must be a table with only `groups` and "
                           "[tools.files].", hint='Write: [tools]\ngroups = ["files", "knowledge"]')
    data.update(files_table(table.get("files"), path))
    groups = table.get("groups")
    if isinstance(groups, list) and all(isinstance(g, str) for g in groups):
        groups = ",".join(groups) or "none"
    if groups is not None and not isinstance(groups, str):
        raise InvalidInput(f"[tools] groups in {path} must be a list of group names.",
                           hint='Write: groups = ["files", "knowledge"] (or "all", "none").')
    if groups is not None:
        data["tools.groups"] = groups
    return data


FILES_KEYS = ("deny", "allow", "folders")


def files_table(table: Any, path: Path) -> dict[str, tuple[str, ...]]:
    """`[tools.files] deny = ["*.sqlite"]`, `allow = ["~/work/.env"]`, `folders = [...]`."""
    if table is None:
        return {}
    bad = not isinstance(table, dict) or bool(set(table) - set(FILES_KEYS)) or any(
        not isinstance(v, list) or not all(isinstance(x, str) and x for x in v)
        for v in table.values())
    if bad:
        raise InvalidInput(f"[tools.files] in {path} may hold only deny, allow and folders, "
                           "each a list of paths or patterns.",
                           hint='Write: [tools.files]\ndeny = ["*.sqlite"]\nallow = ["~/w/.env"]')
    return {f"tools.files.{key}": tuple(value) for key, value in table.items()}


def flatten(data: dict[str, Any], known: Collection[str]) -> dict[str, Any]:
    """`[rag]`, `[memory]` and `[history]` tables (and TOML's dotted keys, `history.url =
    …`, which are the same thing) as the flat `history.url` keys of SPECS; other tables
    stay as they are."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and any(k.startswith(key + ".") for k in known):
            out.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            out[key] = value
    return out


def in_file(from_file: dict[str, Any], key: str) -> tuple[Any, ...]:
    """(value,) when config.toml sets `key`; its tables arrive flattened (`rag.theta`)."""
    return (from_file[key],) if key in from_file else ()
