"""What every command shares: the invocation's settings, output mode, Ollama client,
history and embedder.

Built once by the top-level group and passed down as `ctx.obj`, so a subcommand asks
for `app.client`, `app.history()` or `app.embedder()` instead of reading environment
variables and building its own; that keeps the precedence rule (flags > env > config
file > defaults) in one place. Everything is opened lazily: `localgpt --help` imports
none of ollama, lancedb or the history store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from localgpt_cli.config import Settings, cache_dir, history_backend, load_settings
from localgpt_cli.errors import setting_error
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
    embed_provider: str | None = None  # --provider of the knowledge-base commands
    _settings: Settings | None = None
    _providers: dict[tuple[str, float | None], Any] = field(default_factory=dict)
    _catalog: Any = None
    save: bool = True  # False under chat --no-save: not even the model cache is written
    _local_embedder: Any = None
    _memory: Any = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            settings = load_settings(self.flags)
            _check_ranges(settings)
            self._settings = settings
        return self._settings

    def set_flag(self, key: str, value: Any) -> None:
        """A per-command flag that overrides the environment and config file."""
        if value is not None:
            self.flags[key] = value
            self._settings = None

    @contextlib.contextmanager
    def trial(self) -> Iterator[None]:
        """Flags set inside the block stay only if it ends without an error; otherwise the
        flags and settings from before are back, so a refused REPL `/model` changes
        nothing."""
        kept = dict(self.flags), self._settings
        try:
            yield
        except BaseException:
            self.flags, self._settings = kept
            raise

    def provider(self, name: str | None = None, timeout: float | None = None) -> Any:
        """The server of profile `name` (the settings' choice when None), opened once per
        invocation; "" (and `ollama` without such a profile) is the Ollama at `host`."""
        settings = self.settings
        if name is None:
            name = settings.provider or "ollama"
        timeout = timeout or settings.timeout
        if (name, timeout) not in self._providers:
            self._providers[name, timeout] = open_provider(settings, name, timeout)
        return self._providers[name, timeout]

    @property
    def client(self) -> Any:
        """The provider the settings choose: a `[providers.NAME]` profile, else Ollama."""
        return self.provider()

    @property
    def ollama(self) -> Any:
        """The Ollama client at `host`: `client` itself unless a profile of another kind
        was chosen (pull, ps and web tools are Ollama's own)."""
        return self._ollama_at()

    def _ollama_at(self, timeout: float | None = None) -> Any:
        chosen = self.provider(None, timeout)
        return chosen if getattr(chosen, "pull", None) is not None else self.provider("", timeout)

    @property
    def catalog(self) -> Any:
        if self._catalog is None or self._catalog.client is not self.client:
            from localgpt_cli.llm.catalog import ModelCatalog

            self._catalog = ModelCatalog(self.client, cache_dir() / "models.json")
        self._catalog.save = self.save
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
        return RoutedEmbedder(self._local_embedder,
                              lambda name: self._server_embedder(documents, name))

    def _server_embedder(self, documents: bool, model: str) -> tuple[Embedder, str]:
        """The server that embeds `model`, and the name it knows the model by:
        `NAME:MODEL` of a configured profile goes to that profile's server, every other
        model to Ollama (the chosen profile's when it is an Ollama, else the one at `host`)."""
        timeout = None if not documents or self.settings.timeout else DOCUMENT_EMBED_TIMEOUT
        name, sep, rest = model.partition(":")
        if sep and rest and name in self.settings.profiles:
            return self.provider(name, timeout), rest
        return self._ollama_at(timeout), model

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

            opened = PostgresStore.open_existing(url or "postgresql://", create=not readonly)
            if opened is None:
                return None  # nothing written there yet: as a missing SQLite file
            store = opened
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


def _check_ranges(settings: Settings) -> None:
    """`timeout` and `window` from the environment or the file are held to their flags'
    ranges (click checks the flags): a timeout of 0 or less failed half way through the
    first request (exit 1), a negative window meant nothing. One line naming the file."""
    import math

    above_0 = (lambda v: 0 < v < math.inf, "a number above 0")
    for key, fits, want in (("timeout", *above_0), ("idle_timeout", *above_0),
                            ("window", lambda v: v >= 0, "0 or more")):  # fmt: skip
        value = settings.values.get(key)
        if value is not None and not fits(value):
            where = settings.named(key)
            raise setting_error(where, f"{key} must be {want}, got {value!r} (from {where}).")


def open_provider(settings: Settings, name: str, timeout: float | None) -> Provider:
    """A client of profile `name`; `ollama` (or "" for the plain one) with no such
    profile is the Ollama at `host`."""
    profile = settings.profiles.get(name)
    if profile is not None and profile.kind == "llamacpp":
        from localgpt_cli.llm.llamacpp import LlamaCppProvider

        return LlamaCppProvider(
            profile.model_path or "", name=profile.name, model=profile.default_model,
            capabilities=profile.capabilities or (), context_length=profile.context_length,
        )  # fmt: skip
    if profile is not None and profile.kind == "openai":
        from localgpt_cli.llm.openai import OpenAIProvider

        return OpenAIProvider(
            profile.base_url or "", name=profile.name, api_key_env=profile.api_key_env,
            timeout=timeout, idle=settings.idle_timeout, capabilities=profile.capabilities,
            context_length=profile.context_length, refusals=cache_dir() / "tools-refused.json",
        )  # fmt: skip
    from localgpt_cli.llm.ollama import OllamaClient

    host = profile.base_url if profile and profile.base_url else settings.host
    return OllamaClient(host, timeout=timeout, idle=settings.idle_timeout)


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


def _set_provider(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(App).set_flag("provider", value)


def provider_option(f: F) -> F:
    """`--provider NAME`: the `[providers.NAME]` profile to use (`ollama`: the one at
    host); same as LOCALGPT_PROVIDER or the `NAME:` of `-m NAME:MODEL`."""
    return click.option(
        "-p",
        "--provider",
        metavar="NAME",
        expose_value=False,
        callback=_set_provider,
        help="Provider profile to use ([providers.NAME]; default: LOCALGPT_PROVIDER).",
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
