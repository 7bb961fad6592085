"""Which models of which OpenAI-kind profiles refused tools, remembered on disk.

An OpenAI-compatible server says nothing about tools in `/v1/models`, so localgpt offers
them and learns from a 400 that names them (llm/openai_http.py). That costs a request
and a warning, so the refusal is kept per profile, server and model in a small JSON file
in the cache dir, as llm/catalog.py keeps Ollama's capabilities, for a day: a server
restarted with tool calling on is tried again the next day, or at once with
`capabilities = ["tools"]` in the profile.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from localgpt_cli.llm.catalog import save_cache

TTL_SECONDS = 86400.0


class ToolRefusals:
    """The refusals file; a file that cannot be read or written only costs a request."""

    def __init__(self, path: Path | None, ttl: float = TTL_SECONDS) -> None:
        self.path = path
        self.ttl = ttl

    @staticmethod
    def key(profile: str, host: str, model: str) -> str:
        return f"{profile} {host} {model}"

    def _load(self) -> dict[str, float]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, int | float)} \
            if isinstance(data, dict) else {}  # fmt: skip

    def refused(self, profile: str, host: str, model: str) -> bool:
        at = self._load().get(self.key(profile, host, model))
        return at is not None and time.time() - at < self.ttl

    def remember(self, profile: str, host: str, model: str) -> None:
        if self.path is None:
            return
        data = self._load()
        data[self.key(profile, host, model)] = time.time()
        save_cache(self.path, data)
