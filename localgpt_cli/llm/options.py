"""Typed, range-checked Ollama model options for `-o KEY VALUE`.

Ollama silently ignores an option of the wrong type or an unknown key, so a typo in
`-o temprature 0` would change nothing without a word; and it takes values no sampler can
use (`num_ctx -5`, `top_p 7`) or fails on them with an error that blames the server
(`temperature nan`). We check names, types and ranges here and fail with a usage error
naming the allowed range before any request is made.
"""

from __future__ import annotations

import math
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
INT_MAX = 2**31 - 1  # llama.cpp keeps these in C ints
# The values each numeric option can take: (lowest, highest), None for no bound. Special
# values are Ollama's own: -1 is "infinite" for num_predict, "all" for num_keep, "random"
# for seed, "the whole context" for repeat_last_n, "automatic" for num_gpu; -2 for
# num_predict is "fill the context"; 0 threads is automatic.
OPTION_RANGES: dict[str, tuple[float, float | None]] = {
    "num_ctx": (1, INT_MAX), "num_predict": (-2, INT_MAX), "num_keep": (-1, INT_MAX),
    "seed": (-1, 2**32 - 1), "top_k": (0, INT_MAX), "repeat_last_n": (-1, INT_MAX),
    "num_batch": (1, INT_MAX), "num_gpu": (-1, INT_MAX), "main_gpu": (0, INT_MAX),
    "num_thread": (0, INT_MAX), "mirostat": (0, 2),
    "temperature": (0, None), "top_p": (0, 1), "min_p": (0, 1), "typical_p": (0, 1),
    "repeat_penalty": (0, None), "presence_penalty": (-2, 2), "frequency_penalty": (-2, 2),
    "mirostat_tau": (0, None), "mirostat_eta": (0, None), "tfs_z": (0, None),
}  # fmt: skip
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def allowed_range(key: str) -> str:
    """The range of a numeric option as people write it: `0 to 1`, `0 or more`."""
    low, high = (v if v is None or v % 1 else int(v) for v in OPTION_RANGES[key])
    return f"{low} or more" if high is None else f"{low} to {high}"


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
        if key in OPTION_RANGES:
            _check_range(key, options[key], raw)
    return options


def _check_range(key: str, value: float, raw: str) -> None:
    low, high = OPTION_RANGES[key]
    if math.isfinite(value) and value >= low and (high is None or value <= high):
        return
    raise UsageError(
        f"Model option {key!r} must be {allowed_range(key)}, got {raw!r}."
    )
