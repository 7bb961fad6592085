"""What every command shares: the invocation's settings, output mode, Ollama client,
history and embedder.

Built once by the top-level group and passed down as `ctx.obj`, so a subcommand asks
for `app.client`, `app.history()` or `app.embedder()` instead of reading environment
variables and building its own; that keeps the precedence rule (flags > env > config
file > defaults) in one place. Everything is opened lazily: `localgpt --help` imports
none of ollama, lancedb or the history store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from localgpt_cli.config import Settings, cache_dir, history_backend, load_settings
from localgpt_cli.render.output import Output

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.llm.provider import Embedder, Provider

F = TypeVar("F", bound=Callable[..., Any])

# Embedding a batch of documents can take a while on a CPU: how long ingest waits for one
# unless --timeout says otherwise.
DOCUMENT_EMBED_TIMEOUT = 120.0


@dataclass
class App:
    """Per-invocation state; settings are resolved lazily so `--help` reads no files."""

    output: Output = field(default_factory=Output)
    debug: bool = False
    flags: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None
    _client: Any = None
    _ollama: Any = None
    _catalog: Any = None
    _document_embedder: Any = None
    _local_embedder: Any = None
    _memory: Any = None

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
        """The provider the settings choose: a `[providers.NAME]` profile, else Ollama."""
        if self._client is None:
            settings = self.settings
            profile = settings.profile
            if profile is not None and profile.kind == "openai":
                from localgpt_cli.llm.openai import OpenAIProvider

                self._client = OpenAIProvider(
                    profile.base_url or "", name=profile.name, api_key_env=profile.api_key_env,
                    timeout=settings.timeout, capabilities=profile.capabilities,
                    context_length=profile.context_length,
                )
            else:
                from localgpt_cli.llm.ollama import OllamaClient

                host = profile.base_url if profile and profile.base_url else settings.host
                self._client = OllamaClient(host, timeout=settings.timeout)
        return self._client

    @property
    def ollama(self) -> Any:
        """The Ollama client at `host`: `client` itself unless a profile of another kind
        was chosen (embeddings stay on Ollama for now)."""
        client = self.client
        if getattr(client, "pull", None) is not None:
            return client
        if self._ollama is None:
            from localgpt_cli.llm.ollama import OllamaClient

            self._ollama = OllamaClient(self.settings.host, timeout=self.settings.timeout)
        return self._ollama

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from localgpt_cli.llm.catalog import ModelCatalog

            self._catalog = ModelCatalog(self.client, cache_dir() / "models.json")
        return self._catalog

    def embedder(self, *, documents: bool = False, model: str | None = None) -> Embedder:
        """What embeds for the knowledge base: `local:` models in this process
        (llm/local.py), every other model through the server.

        Given the `model` about to be used, a `local:` one is checked now (the `[local]`
        extra and its files), so a missing piece is one line before any work. The server is
        opened only when a non-local model embeds. A query is one short request and waits
        as every other call of the command does (--timeout, else no limit); documents go
        in batches that can take a while on a CPU, so ingest waits 120 s unless --timeout
        says otherwise.
        """
        from localgpt_cli.llm.local import LocalEmbedder, RoutedEmbedder, is_local

        if self._local_embedder is None:
            self._local_embedder = LocalEmbedder()
        if is_local(model):
            self._local_embedder.check(str(model))
        return RoutedEmbedder(self._local_embedder, lambda: self._server_embedder(documents))

    def _server_embedder(self, documents: bool) -> Provider:
        if not documents or self.settings.timeout:
            return self.ollama  # the knowledge base is embedded by Ollama whatever chats
        if self._document_embedder is None:
            from localgpt_cli.llm.ollama import OllamaClient

            self._document_embedder = OllamaClient(
                self.settings.host, timeout=DOCUMENT_EMBED_TIMEOUT
            )
        return self._document_embedder

    def history(self, readonly: bool = False) -> Store | None:
        """The history the settings choose (config.history_backend): the SQLite file under
        LOCALGPT_HOME (None when read-only and absent), this process's memory, or the
        PostgreSQL server at `history.url`."""
        backend, url = history_backend(self.settings)
        if backend == "memory":
            return self.memory_history()
        store: Store
        if backend == "postgres":
            from localgpt_cli.history.postgres import PostgresStore

            store = PostgresStore.open(url or "postgresql://")
        else:
            from localgpt_cli.history.sqlite import SQLiteStore

            path = self.settings.home_dir / "history.db"
            if readonly and not path.exists():
                return None
            if not readonly:
                self.settings.writable_dir("home")
            store = SQLiteStore.open(path)
        # Closed when the command ends (also by sys.exit): in-process callers (tests) keep
        # no connection open, and a SQLite file is recorded as checked (history/integrity.py).
        click.get_current_context().call_on_close(store.close)
        return store

    def memory_history(self) -> Store:
        """This process's in-memory history (`--no-save`, `history.backend = "memory"`):
        whole for as long as the process runs, nothing on disk."""
        if self._memory is None:
            from localgpt_cli.history.memory import MemoryStore

            self._memory = MemoryStore()
        return self._memory


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


class Finite(click.FloatRange):
    """A FloatRange that refuses nan: every comparison with nan is false, so the range
    check lets it through, a --wait-lock of nan seconds never ends, and a --threshold of
    nan keeps every hit."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:  # nan
            self.fail(f"{value!r} is not in the range {self._describe_range()}.", param, ctx)
        return number
