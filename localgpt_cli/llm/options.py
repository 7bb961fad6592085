"""Typed Ollama model options for `-o KEY VALUE`.

Ollama silently ignores an option of the wrong type or an unknown key, so a typo in
`-o temprature 0` would change nothing without a word. We check names and types here
and fail with a usage error instead.
"""

from __future__ import annotations

from typing import Any

from localgpt_cli.errors import UsageError

OPTION_TYPES: dict[str, type] = {
    "num_ctx": int, "num_predict": int, "num_keep": int, "seed": int, "top_k": int,
    "repeat_last_n": int, "num_batch": int, "num_gpu": int, "main_gpu": int,
    "num_thread": int, "mirostat": int,
    "temperature": float, "top_p": float, "min_p": float, "typical_p": float,
    "repeat_penalty": float, "presence_penalty": float, "frequency_penalty": float,
    "mirostat_tau": float, "mirostat_eta": float, "tfs_z": float,
    "penalize_newline": bool, "use_mmap": bool, "use_mlock": bool, "low_vram": bool,
    "numa": bool,
    "stop": list,
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_options(pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> dict[str, Any]:
    """`[("temperature", "0.2"), ("stop", "\\n\\n")]` -> `{"temperature": 0.2, "stop": [...]}`."""
    options: dict[str, Any] = {}
    for key, raw in pairs:
        kind = OPTION_TYPES.get(key)
        if kind is None:
            known = ", ".join(sorted(OPTION_TYPES))
            raise UsageError(f"Unknown model option {key!r} in -o.", hint=f"Known: {known}.")
        if kind is list:
            options.setdefault(key, []).append(raw)
            continue
        try:
            if kind is bool:
                lowered = raw.strip().lower()
                if lowered not in _TRUE | _FALSE:
                    raise ValueError
                options[key] = lowered in _TRUE
            else:
                options[key] = kind(raw)
        except ValueError:
            expected = {int: "an integer", float: "a number", bool: "true or false"}[kind]
            raise UsageError(f"Model option {key!r} expects {expected}, got {raw!r}.") from None
    return options
