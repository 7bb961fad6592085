"""The model list and each model's capabilities, cached on disk for five minutes.

Every `chat` needs to know whether the model thinks, calls tools and how long its
context is (/api/show); every `models` listing asks /api/tags. Neither changes often, so
one small JSON file in the cache dir saves a round trip on most invocations.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from localgpt_cli.errors import ModelNotFound
from localgpt_cli.llm.client import ModelInfo, ModelSummary, OllamaClient

TTL_SECONDS = 300.0


def canonical(name: str) -> str:
    """Ollama's own rule: a name without a tag means `:latest`."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class ModelCatalog:
    """Cached /api/tags and /api/show for one host."""

    def __init__(self, client: OllamaClient, cache_path: Path, ttl: float = TTL_SECONDS):
        self.client = client
        self.cache_path = cache_path
        self.ttl = ttl

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.cache_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if data.get("host") == self.client.host else {}

    def _save(self, data: dict[str, Any]) -> None:
        data["host"] = self.client.host
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, prefix=".models.")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.cache_path)
        except OSError:
            pass  # a cache that cannot be written only costs a round trip next time

    def _fresh(self, stamp: float | None) -> bool:
        return stamp is not None and time.time() - stamp < self.ttl

    def list(self, refresh: bool = False) -> tuple[list[ModelSummary], bool]:
        """The installed models, and whether they came from the cache."""
        data = self._load()
        entry = data.get("tags")
        if not refresh and entry and self._fresh(entry.get("at")):
            return [ModelSummary(**m) for m in entry["models"]], True
        models = self.client.list_models()
        data["tags"] = {"at": time.time(), "models": [asdict(m) for m in models]}
        self._save(data)
        return models, False

    def show(self, name: str, refresh: bool = False) -> ModelInfo:
        """Capabilities and context length; an unknown model -> ModelNotFound with the list."""
        key = canonical(name)
        data = self._load()
        entry = data.get("show", {}).get(key)
        if not refresh and entry and self._fresh(entry.get("at")):
            return ModelInfo(**entry["info"])
        try:
            info = self.client.show(name)
        except ModelNotFound as exc:
            raise self.not_found(name) from exc
        data.setdefault("show", {})[key] = {"at": time.time(), "info": asdict(info)}
        self._save(data)
        return info

    def not_found(self, name: str) -> ModelNotFound:
        """The error for a missing model, naming the installed ones (best effort)."""
        try:
            installed = [m.name for m in self.client.list_models()]
        except Exception:  # the list is a courtesy; the error stands without it
            installed = []
        listed = ", ".join(installed) if installed else "none"
        return ModelNotFound(
            f"Model {name!r} is not installed at {self.client.host}.",
            hint=f"Installed: {listed}. Pull it with `localgpt models pull {name}`.",
        )
