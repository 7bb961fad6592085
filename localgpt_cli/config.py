"""Settings from flags > environment > config.toml > defaults, and the XDG paths.

Every setting remembers where its value came from, so `localgpt config` can say why a
value is what it is: the first question anyone asks when "it talks to the wrong host".
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from localgpt_cli.config_toml import in_file, load_file
from localgpt_cli.errors import InvalidInput, setting_error
from localgpt_cli.hosts import DEFAULT_HOST, normalize_host

DEFAULT_MODEL = "llama3.2"
DEFAULT_EMBED_MODEL = "nomic-embed-text"


@dataclass(frozen=True)
class Spec:
    """One setting: its key in config.toml, its environment variable, default and type."""

    key: str
    env: str | None
    default: Any
    kind: type
    help: str


SPECS: tuple[Spec, ...] = (
    Spec("host", "OLLAMA_HOST", DEFAULT_HOST, str, "Ollama server"),
    Spec("model", "LOCALGPT_MODEL", DEFAULT_MODEL, str, "chat model"),
    Spec("embed_model", "LOCALGPT_EMBED_MODEL", DEFAULT_EMBED_MODEL, str, "embedding model"),
    Spec("home", "LOCALGPT_HOME", None, str, "data folder (history, lancedb, lock)"),
    Spec("db", "LOCALGPT_DB", None, str, "LanceDB URI (default: <home>/lancedb)"),
    Spec("system", None, None, str, "default system prompt"),
    Spec("timeout", None, None, float, "seconds to a first token or whole reply (default: 600)"),
    Spec("idle_timeout", None, None, float, "seconds between two tokens (default: 120)"),
    Spec("window", None, 20, int, "history messages kept in the context"),
    Spec("collection", "LOCALGPT_COLLECTION", "default", str, "knowledge-base collection"),
    Spec("provider", "LOCALGPT_PROVIDER", "ollama", str, "provider profile ([providers.NAME])"),
    Spec("tools.groups", "LOCALGPT_TOOLS", None, str,
         "tool groups a chat may use: GROUP,GROUP | all | none ([tools] groups)"),
    Spec("tools.files.deny", None, (), tuple, "paths/patterns the file tools refuse too"),
    Spec("tools.files.allow", None, (), tuple, "paths the built-in secrets rules let through"),
    Spec("tools.files.folders", None, (), tuple, "more folders the file tools read"),
    # [rag] in config.toml: how chat grounds its answers (kernel/answer/)
    Spec("rag.pipeline", None, "full", str, "chat's answer pipeline: full or fast"),
    Spec("rag.condense", None, True, bool, "condense the kept passages into S_ctx"),
    Spec("rag.stage_timeout", None, 60.0, float, "seconds a pipeline stage waits for the model"),
    Spec("rag.theta", None, None, float, "gate strictness 0-1 ([rag] theta; default 0.15)"),
    Spec("rag.rerank_model", None, None, str, "a provider's reranker: PROFILE:MODEL"),
    Spec("memory.recent_turns", None, 4, int, "last turns always sent whole (G)"),
    Spec("memory.half_life_turns", None, 30.0, float, "older turns fade by half every N turns"),
    Spec("memory.half_life_days", None, None, float, "and every N days (default: no time fading)"),
    Spec("memory.project_share", None, 0.25, float, "share of the prompt for project memory"),
    Spec("ingest.local_fallback", None, True, bool,
         "a new collection is embedded in-process when Ollama is down ([local] extra)"),
    Spec("ingest.ocr", None, "auto", str, "scanned pages and images: auto, always or never"),
    Spec("ingest.ocr_languages", None, "eng", str, "Tesseract language packs, e.g. eng+deu"),
    Spec("ingest.ocr_page_timeout", None, 120.0, float, "seconds OCR may spend on one page"),
    Spec("ingest.workers", None, None, int, "processes that parse and chunk (default: the cores)"),
    Spec("ingest.concurrency", None, 2, int, "embedding requests ingest keeps in flight"),
    Spec("history.backend", "LOCALGPT_HISTORY_BACKEND", "sqlite", str,
         "where history is kept: sqlite (<home>/history.db), memory, postgres"),
    Spec("history.url", "LOCALGPT_HISTORY_URL", None, str,
         "postgresql://… URL of a shared history (its password is never shown)"),
    Spec("history.keep_images", None, False, bool,
         "keep the bytes of pictures sent to a model (default: their hash and size only)"),
)
SPEC_BY_KEY = {s.key: s for s in SPECS}


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def config_dir() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "localgpt"


def cache_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "localgpt"


def config_file() -> Path:
    return Path(os.environ.get("LOCALGPT_CONFIG") or config_dir() / "config.toml")


HISTORY_BACKENDS = ("sqlite", "memory", "postgres")


def history_backend(settings: Settings) -> tuple[str, str | None]:
    """The history backend and, for postgres, its URL.

    A `history.url` alone chooses postgres; `history.backend = "postgres"` without a URL
    connects as libpq's PG* variables (PGHOST, PGUSER, PGPASSWORD, …) say.
    """
    backend = str(settings.values["history.backend"]).strip().lower()
    url = settings.values["history.url"]
    if backend not in HISTORY_BACKENDS:
        where = settings.named("history.backend")
        raise setting_error(where, f"history.backend {backend!r} ({where}) is not one of "
                            f"{', '.join(HISTORY_BACKENDS)}.")  # fmt: skip
    if url and not str(url).startswith(("postgresql://", "postgres://")):
        where = settings.named("history.url")
        raise setting_error(where, f"history.url ({where}) must start with postgresql://.",
                            hint="e.g. postgresql://user@db-host/localgpt")
    if url and settings.sources["history.backend"] == "default":
        backend = "postgres"
    if backend == "postgres":
        return backend, str(url or "postgresql://")
    return backend, None


def _coerce(spec: Spec, value: Any, where: str) -> Any:
    if value is None:
        return None
    try:
        if isinstance(value, bool) is not (spec.kind is bool) and spec.kind in (int, bool):
            raise ValueError
        return spec.kind(value)
    except (TypeError, ValueError):
        where = f"--{spec.key}" if where == "flag" else where
        raise setting_error(where, f"Setting {spec.key!r} from {where} must be "
                            f"{spec.kind.__name__}, got {value!r}.") from None


PROFILE_KINDS = ("openai", "ollama", "llamacpp")
PROFILE_KEYS = {"kind": str, "base_url": str, "api_key_env": str, "default_model": str,
                "capabilities": list, "context_length": int, "model_path": str}  # fmt: skip


@dataclass(frozen=True)
class Profile:
    """One `[providers.NAME]` table: a model server and how to reach it. The API key is
    never here: only the name of the environment variable that holds it."""

    name: str
    kind: str
    base_url: str | None
    source: str
    api_key_env: str | None = None
    default_model: str | None = None
    capabilities: tuple[str, ...] | None = None  # None: not said (openai: tools tried)
    context_length: int | None = None
    model_path: str | None = None  # kind llamacpp: the GGUF file run in this process

    def to_record(self) -> dict[str, Any]:
        return {"type": "provider", "name": self.name, "kind": self.kind,
                "base_url": self.base_url, "model_path": self.model_path,
                "api_key_env": self.api_key_env, "api_key": mask_key(self.api_key_env),
                "default_model": self.default_model, "source": self.source}  # fmt: skip


def _profiles(tables: Any, path: Path) -> dict[str, Profile]:
    """The `[providers.NAME]` tables of the config file, checked."""
    where = f"file {path}"
    if not isinstance(tables, dict):
        raise InvalidInput(f"`providers` in {path} must be a table of [providers.NAME] tables.")
    out = {}
    for name, table in tables.items():
        what = f"[providers.{name}] in {path}"
        if not isinstance(table, dict):
            raise InvalidInput(f"{what} must be a table.")
        unknown = sorted(set(table) - set(PROFILE_KEYS))
        bad = [k for k, t in PROFILE_KEYS.items() if k in table and not isinstance(table[k], t)]
        if unknown or bad:
            raise InvalidInput(f"{what} has unknown or mistyped keys: {', '.join(unknown + bad)}.",
                               hint=f"Known keys: {', '.join(PROFILE_KEYS)}.")
        kind = table.get("kind", "ollama")
        if kind not in PROFILE_KINDS or (kind == "openai" and not table.get("base_url")) \
                or (kind == "llamacpp" and not table.get("model_path")):  # fmt: skip
            raise InvalidInput(f"{what} needs kind = \"openai\", \"ollama\" or \"llamacpp\" "
                               "(and base_url for openai, model_path for llamacpp).")
        base_url = table.get("base_url")
        base_url = normalize_host(base_url, what) if kind == "ollama" and base_url else base_url
        caps = tuple(table["capabilities"]) if "capabilities" in table else None
        stem = Path(table["model_path"]).stem if kind == "llamacpp" else None  # the file's model
        out[name] = Profile(name, kind, base_url, where, table.get("api_key_env"),
                            table.get("default_model") or stem, caps,
                            table.get("context_length"), table.get("model_path"))  # fmt: skip
    return out


@dataclass
class Settings:
    """Effective settings; `sources[key]` says where each value came from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)

    @property
    def profile(self) -> Profile | None:
        """The profile the settings choose; None is the plain Ollama at `host`."""
        return self.profiles.get(self.values.get("provider") or "ollama")

    def __getattr__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def home_dir(self) -> Path:
        return Path(self.values["home"])

    @property
    def db_uri(self) -> str:
        return str(self.values["db"])

    def named(self, key: str) -> str:
        """How the user set `key`, as they would recognise it: `--db`, `LOCALGPT_HOME`,
        `db in /path/config.toml`, or `the default home`."""
        source = self.sources.get(key, "default")
        if source == "flag":
            return f"--{key}"
        if source.startswith("env "):
            return source.removeprefix("env ")
        if source.startswith("file "):
            return f"{key} in {source.removeprefix('file ')}"
        return f"the default {key}"

    def writable_dir(self, key: str, keep: bool = True, path: Path | None = None) -> Path:
        """Create the folder setting `key` (`home`, or a local `db`) names, before a command
        writes there; with `keep=False` only prove that it can be created (what was made is
        removed again, so a run that then stops at the lock leaves nothing behind).

        Only commands that write call this, so a read-only command never creates folders.
        A path that cannot be a writable folder is one line naming the path, the setting
        and the problem: a usage error when it came from a flag, invalid input otherwise
        (instead of an OSError surfacing as an internal error half way through). `path` is
        the folder the setting names when its value is a URI (`file:///srv/kb`).
        """
        if path is None:
            path = Path(str(self.values[key]))
        made = [p for p in (path, *path.parents) if not os.path.lexists(p)]
        problem = None
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                problem = "it is not writable"
        except FileExistsError:
            problem = "it is a file, not a folder"
        except OSError as exc:
            problem = exc.strerror or str(exc)
        finally:
            for folder in [] if keep else made:  # deepest first
                with contextlib.suppress(OSError):
                    folder.rmdir()
        if problem is None:
            return path
        named = self.named(key)
        setting = SPEC_BY_KEY[key].env if named.startswith("the default") else named
        raise setting_error(named, f"Cannot use {path} ({named}) as a folder: {problem}.",
                            hint=f"Point {setting} at a folder you can write.")


def load_settings(flags: dict[str, Any] | None = None) -> Settings:
    """Resolve every setting: flags > environment > config file > defaults."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    from_file = load_file(path := config_file(), SPEC_BY_KEY)
    settings = Settings()
    for spec in SPECS:
        if spec.key in flags:
            value, source = flags[spec.key], "flag"
        elif spec.env and os.environ.get(spec.env):
            value, source = os.environ[spec.env], f"env {spec.env}"
        elif found := in_file(from_file, spec.key):
            value, source = found[0], f"file {path}"
        else:
            value, source = spec.default, "default"
        settings.values[spec.key] = _coerce(spec, value, source)
        settings.sources[spec.key] = source
    settings.values["host"] = normalize_host(settings.values["host"], settings.named("host"))
    settings.profiles = _profiles(from_file.get("providers", {}), path)
    _choose_profile(settings)
    if settings.values["home"] is None:
        settings.values["home"] = str(_xdg("XDG_DATA_HOME", ".local/share") / "localgpt")
        settings.sources["home"] = "default (XDG data dir)"
    # `~` expanded once, here: LanceDB expands it in a store path and the lock, manifests
    # and history did not, so `LOCALGPT_DB=~/kb` put them in a folder named `~` under
    # whatever folder the command ran in.
    settings.values["home"] = os.path.expanduser(settings.values["home"])
    db = settings.values["db"]
    if db is not None and "://" not in db:
        settings.values["db"] = os.path.expanduser(db)
    if settings.values["db"] is None:
        settings.values["db"] = str(Path(settings.values["home"]) / "lancedb")
        settings.sources["db"] = "default (<home>/lancedb)"
    return settings


def _choose_profile(settings: Settings) -> None:
    """`-m NAME:MODEL` picks profile NAME when NAME is configured (`qwen3:8b` stays an Ollama
    model with a tag; `-m NAME:` is the profile's default_model); else `provider` (flag,
    LOCALGPT_PROVIDER, file) does. A profile's default_model stands in for the default
    model. A provider that is not configured is one line naming those that are: a usage
    error from a flag, a configuration error from the environment or the file."""
    values, sources, profiles = settings.values, settings.sources, settings.profiles
    prefix, sep, rest = str(values["model"]).partition(":")
    said = settings.named("model")  # `-m work:` is still what to fix when the model is missing
    if sep and (prefix in profiles or prefix == "ollama" or not rest):
        if prefix not in profiles and prefix != "ollama":
            unknown_provider(settings, prefix, said)
        values["provider"], values["model"] = prefix, rest
        sources["provider"] = sources["model"]
        if not rest:
            sources["model"] = "default"  # `-m work:`: the profile's default_model
    name = values["provider"]
    if name != "ollama" and name not in profiles:
        unknown_provider(settings, name, settings.named("provider"))
    profile = profiles.get(name)
    if profile and profile.default_model and sources["model"] == "default":
        values["model"] = profile.default_model
        sources["model"] = f"default_model of [providers.{name}]"
    elif not values["model"]:
        raise setting_error(said, f"{said} names provider {name!r} but no model, and the "
                            "profile has no default_model.", hint=f"Give one: -m {name}:MODEL.")


def unknown_provider(settings: Settings, name: str, where: str) -> NoReturn:
    configured = ", ".join(dict.fromkeys(["ollama", *settings.profiles]))
    raise setting_error(where, f"No provider profile {name!r} ({where}); configured: "
                        f"{configured}.", hint=f"Add [providers.{name}] to {config_file()}, "
                        "or choose a configured one.")


def mask_key(env: str | None) -> str | None:
    """How `config` shows a profile's API key: whether its variable is set, and at most
    its last four characters (enough to tell two keys apart, never the key)."""
    if not env:
        return None
    key = os.environ.get(env)
    if not key:
        return f"${env} (not set)"
    tail = key[-4:] if len(key) >= 16 else ""
    return f"${env} (set: ****{tail})"
