"""What every command shares: the invocation's settings, output mode and Ollama client.

Built once by the top-level group and passed down as `ctx.obj`, so a subcommand asks
for `app.client` instead of reading environment variables itself; that keeps the
precedence rule (flags > env > config file > defaults) in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from localgpt_cli.config import Settings, cache_dir, load_settings
from localgpt_cli.render.output import Output

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    """Per-invocation state; settings are resolved lazily so `--help` reads no files."""

    output: Output = field(default_factory=Output)
    debug: bool = False
    flags: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None
    _client: Any = None
    _catalog: Any = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.flags)
        return self._settings

    def set_flag(self, key: str, value: Any) -> None:
        """A per-command flag that overrides the environment and config file."""
        if value is not None:
            self.flags[key] = value
            self._settings = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from localgpt_cli.llm.ollama import OllamaClient

            self._client = OllamaClient(self.settings.host, timeout=self.settings.timeout)
        return self._client

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from localgpt_cli.llm.catalog import ModelCatalog

            self._catalog = ModelCatalog(self.client, cache_dir() / "models.json")
        return self._catalog


pass_app = click.make_pass_decorator(App, ensure=True)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.ensure_object(App).output.json = True
    return value


def json_option(f: F) -> F:
    """`--json` on a subcommand, same meaning as the global one."""
    return click.option(
        "--json",
        "json_out",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        is_eager=True,
        help="Write NDJSON records to stdout.",
    )(f)
