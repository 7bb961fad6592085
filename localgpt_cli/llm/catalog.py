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
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from localgpt_cli.errors import LocalGPTError, ModelNotFound
from localgpt_cli.llm.provider import ModelInfo, ModelSummary, Provider

TTL_SECONDS = 300.0


def canonical(model: str) -> str:
    """Ollama's own rule: a model name without a tag means `:latest`."""
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def cached_context(cache_path: Path, model: str) -> int | None:
    """The context length the cache last saw for `model`, asking no server: `memory add`
    sizes its warning with it. None when the model was never shown."""
    try:
        entry = json.loads(cache_path.read_text()).get("show", {}).get(canonical(model))
        length = entry["info"]["context_length"]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    return length if isinstance(length, int) and length > 0 else None


class ModelCatalog:
    """Cached /api/tags and /api/show for one host."""

    def __init__(self, client: Provider, cache_path: Path, ttl: float = TTL_SECONDS):
        self.client = client
        self.cache_path = cache_path
        self.ttl = ttl
        self.save = True  # False: read the cache, write nothing (`chat --no-save`)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.cache_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if data.get("host") == self._identity() else {}

    def _identity(self) -> str:
        """What the cache is of: the server, and the capabilities its profile forces (a
        changed `capabilities` must count at once, not after the cache's five minutes)."""
        return f"{self.client.host} {getattr(self.client, 'capabilities', None)}"

    def _save(self, data: dict[str, Any]) -> None:
        if not self.save:
            return
        data["host"] = self._identity()
        save_cache(self.cache_path, data)

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

    def show(self, model: str, refresh: bool = False) -> ModelInfo:
        """Capabilities and context length; an unknown model -> ModelNotFound with the list."""
        key = canonical(model)
        data = self._load()
        entry = data.get("show", {}).get(key)
        if not refresh and entry and self._fresh(entry.get("at")):
            return ModelInfo(**entry["info"])
        try:
            info = self.client.show(model)
        except ModelNotFound as exc:
            raise self.not_found(model) from exc
        data.setdefault("show", {})[key] = {"at": time.time(), "info": asdict(info)}
        self._save(data)
        return info

    def show_resolved(
        self, model: str, warn: Callable[[str, str], None], refresh: bool = False
    ) -> ModelInfo:
        """`show`, but a bare name that is not installed as `model:latest` falls back to the
        one installed tag of that name (`qwen3` -> `qwen3:8b`), said through `warn(code,
        message)`.

        Ollama maps a bare name to `:latest` and stops there, so someone who pulled
        `qwen3:8b` and types `qwen3` gets "not found" for a model they have. Only a single
        candidate is taken: with two tags installed, which one was meant is not ours to
        guess, and the error lists them.
        """
        try:
            return self.show(model, refresh=refresh)
        except ModelNotFound:
            tag = self._only_tag(model)
            if tag is None:
                raise
        warn("model_resolved", f"{model!r} is not installed as {canonical(model)}; using {tag}, "
             f"the only {model} installed.")  # fmt: skip
        return self.show(tag, refresh=refresh)

    def resolve(self, model: str, warn: Callable[[str, str], None]) -> str:
        """The installed model `model` means (see `show_resolved`); `model` itself when it is
        installed, when nothing better is found, or when Ollama cannot be asked (the
        command's own request then reports that)."""
        try:
            return self.show_resolved(model, warn).name
        except LocalGPTError:
            return model

    def _only_tag(self, model: str) -> str | None:
        if ":" in model.rsplit("/", 1)[-1]:
            return None  # a tag was given: that one is meant
        try:
            installed, _cached = self.list(refresh=True)
        except LocalGPTError:
            return None
        tags = [m.name for m in installed if m.name.startswith(f"{model}:")]
        return tags[0] if len(tags) == 1 else None

    def not_found(self, model: str) -> ModelNotFound:
        """The error for a missing model, naming the installed ones (best effort)."""
        try:
            installed = [m.name for m in self.client.list_models()]
        except Exception:  # the list is a courtesy; the error stands without it
            installed = []
        listed = ", ".join(installed) if installed else "none"
        if not hasattr(self.client, "pull"):  # a server localgpt cannot pull to
            return ModelNotFound(f"Model {model!r} is not offered at {self.client.host}.",
                                 hint=f"Offered: {listed}.")  # fmt: skip
        return ModelNotFound(
            f"Model {model!r} is not installed at {self.client.host}.",
            hint=f"Installed: {listed}. Pull it with `localgpt models pull {model}`.",
        )


def save_cache(path: Path, data: dict[str, Any]) -> None:
    """Write a cache file whole (a temporary file renamed over it, so a reader never sees
    half of one); a cache that cannot be written only costs a round trip next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass
