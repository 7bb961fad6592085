"""What the knowledge-base commands (ingest, docs, search) share: options and opening.

`-C/--collection`, `--db` and `-m/--embed-model` go through the settings (flags > env >
config file), so a cron line, a config file and a one-off flag all mean the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from localgpt_cli.cli.app import App, Finite
from localgpt_cli.config import unknown_provider
from localgpt_cli.errors import UsageError, setting_error
from localgpt_cli.render.tables import display_path

F = TypeVar("F", bound=Callable[..., Any])


def _setter(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if value is not None:
            ctx.ensure_object(App).set_flag(key, value)
        return value

    return callback


def collection_options(f: F) -> F:
    """`-C/--collection` and `--db`, stored as settings flags."""
    f = click.option(
        "--db",
        metavar="URI",
        expose_value=False,
        callback=_setter("db"),
        help="LanceDB folder or URI (default: $LOCALGPT_HOME/lancedb, or LOCALGPT_DB).",
    )(f)
    return click.option(
        "-C",
        "--collection",
        metavar="NAME",
        expose_value=False,
        callback=_setter("collection"),
        help="Collection (default: 'default', or LOCALGPT_COLLECTION).",
    )(f)


# --threshold is a cosine similarity: a value outside 0-1 drops every vector hit or none.
THRESHOLD = Finite(0.0, 1.0)


def embed_model_option(f: F) -> F:
    """`-m MODEL` and `--provider NAME` (the profile whose server embeds `MODEL`, the same
    as `-m NAME:MODEL`)."""
    f = click.option(
        "-p",
        "--provider",
        metavar="NAME",
        expose_value=False,
        callback=lambda ctx, _p, value: setattr(ctx.ensure_object(App), "embed_provider", value),
        help="Provider profile whose server embeds ([providers.NAME]; default: Ollama); "
        "search and eval without -m use the collection's model when NAME serves it.",
    )(f)
    return click.option(
        "-m",
        "--embed-model",
        metavar="MODEL",
        expose_value=False,
        callback=_setter("embed_model"),
        help="Embedding model (default: the collection's, else nomic-embed-text); "
        "local:all-minilm-l6-v2 or local:DIR embeds in-process, NAME:MODEL through the "
        "[providers.NAME] profile.",
    )(f)


def open_store(app: App, write: bool = False) -> Any:
    """The knowledge base; with `write`, the folder its lock and manifests go in (a local
    database's own, or the home for object stores without a lease) is checked first, or
    refused in one line naming the setting. Without it nothing is created: reading a
    store that does not exist finds nothing."""
    from localgpt_cli.rag import sidecar
    from localgpt_cli.rag.store import open_store as open_
    from localgpt_cli.rag.store.uri import local_path

    settings = app.settings
    _check_collection_name(app)
    folder = local_path(settings.db_uri)
    if write and folder is not None:  # made by the first write, under the lock
        if settings.sources.get("db", "").startswith("default"):  # inside the home
            settings.writable_dir("home")
        settings.writable_dir("db", keep=False, path=folder)
    elif write and sidecar.s3_location(settings.db_uri) is None:
        settings.writable_dir("home")  # other object stores keep their lock there
    return open_(settings.db_uri, writer=write)


def _check_collection_name(app: App) -> None:
    """The store refuses a name that cannot be a table; said here, where it is known whether
    -C (exit 2) or LOCALGPT_COLLECTION / the config file (exit 6) is to be fixed."""
    from localgpt_cli.rag.store.collection import COLLECTION_NAME

    name = str(app.settings.collection)
    if not COLLECTION_NAME.fullmatch(name):
        where = app.settings.named("collection")
        raise setting_error(where, f"Invalid collection name {name!r} ({where}).",
                            hint="Use 1-64 letters, digits, '_' or '-'.")


# How many candidates an ambiguous document id lists.
CANDIDATES_SHOWN = 5


def resolve_document(coll: Any, ref: str) -> tuple[str, str]:
    """A document id, any unique prefix of it (the 12 characters `docs list` prints) or a
    path (as stored, or as given from here) -> (document id, path).

    Every command that names a document goes through this, so an id copied from one
    command's output works in every other. An ambiguous prefix lists its candidates.
    """
    import os

    from localgpt_cli.errors import AmbiguousId, NotFound

    documents = coll.documents()
    wanted = {ref, os.path.realpath(os.path.expanduser(ref))}
    by_path = [d for d in documents if d.path in wanted]
    if by_path:
        return by_path[0].document_id, by_path[0].path
    prefix = ref.strip().lower()
    matches = [d for d in documents if d.document_id.startswith(prefix)] if prefix else []
    if len(matches) == 1:
        return matches[0].document_id, matches[0].path
    if len(matches) > 1:
        shown = sorted(matches, key=lambda d: d.document_id)[:CANDIDATES_SHOWN]
        listed = "; ".join(f"{d.document_id} ({display_path(d.path)})" for d in shown)
        more = f", and {len(matches) - len(shown)} more" if len(matches) > len(shown) else ""
        raise AmbiguousId(
            f"document id {ref!r} is ambiguous: it starts {listed}{more}.",
            candidates=[d.document_id for d in shown],
            hint="Give more characters of the id, or the path.",
        )
    raise NotFound(
        f"No document {ref!r} in collection {coll.name!r}.",
        hint="See: localgpt docs list.",
    )


def model_explicit(app: App) -> bool:
    """Whether the embedding model was chosen (flag, env or config) rather than defaulted:
    a defaulted model defers to the one the collection was built with."""
    return app.settings.sources.get("embed_model") != "default"


def chosen_embed_model(app: App) -> str:
    """The embedding model named by flag, env or config, resolved as `chat -m` is (a bare
    name not installed as `:latest` means the one installed tag of that name, with a
    warning). A defaulted model is left as it is: it defers to the collection's own."""
    from localgpt_cli.llm.local import canonical, is_local

    settings = app.settings
    model = str(settings.embed_model)
    if is_local(model):  # runs in this process: nothing to ask the server
        return canonical(model)
    profile, sep, rest = model.partition(":")
    if sep and rest and profile in settings.profiles:
        _embeds(app, profile, "-m" if settings.sources["embed_model"] == "flag"
                else settings.named("embed_model"))  # fmt: skip
        return model  # `work:text-embedding-3-small`: the profile's server names it as given
    name = app.embed_provider
    if name is not None and name != "ollama":
        if name not in settings.profiles:
            unknown_provider(settings, name, "--provider")
        _embeds(app, name, "--provider")
        if not model_explicit(app):  # --provider work alone: which of its models is unsaid
            raise UsageError(f"--provider {name} needs the embedding model too.",
                             hint=f"Add -m MODEL (or -m {name}:MODEL).")
        return f"{name}:{model}"
    return app.catalog.resolve(model, app.output.warn) if model_explicit(app) else model


def _embeds(app: App, name: str, where: str) -> None:
    """A profile that cannot embed (a llama.cpp model in process answers chat only) is
    refused here, in one line naming where it was chosen: a usage error from a flag, a
    configuration error from the environment or the file."""
    if app.settings.profiles[name].kind == "llamacpp":
        raise setting_error(where, f"Provider {name!r} ({where}) runs a chat model in this "
                            "process and cannot embed.", hint="Embed with an Ollama model, "
                            "a local: model or an openai profile's model.")  # fmt: skip


def provider_of(model: str, profiles: Any) -> tuple[str, str]:
    """(provider, model as that provider names it) of a recorded embedding model:
    `work:MODEL` of a configured profile, `local:…` in this process, anything else Ollama."""
    from localgpt_cli.llm.local import is_local

    name, sep, rest = model.partition(":")
    if is_local(model):
        return "local", rest
    if sep and rest and name in profiles:
        return name, rest
    return "ollama", model


def recorded_model(app: App, coll: Any) -> str:
    """`--provider NAME` without -m on a search: the question is embedded with the model the
    collection was ingested with, so that model it is, when it is on NAME. Another
    provider's model would make vectors that cannot be compared: one line saying which
    provider:model the collection has and what to run instead (exit 2, the flag is wrong)."""
    name, settings = str(app.embed_provider), app.settings
    if name != "ollama" and name not in settings.profiles:
        unknown_provider(settings, name, "--provider")
    if coll.model is None:
        raise UsageError(f"--provider {name} needs the embedding model too: collection "
                         f"{coll.name!r} records none yet.", hint=f"Add -m MODEL (or -m "
                         f"{name}:MODEL).")  # fmt: skip
    provider, model = provider_of(coll.model, settings.profiles)
    if provider != name:
        raise UsageError(f"--provider {name}: collection {coll.name!r} was ingested with "
                         f"{provider}:{model}, so {provider!r} must embed its questions too.",
                         hint="Drop --provider (the collection's model is used), or re-ingest "
                         f"it on {name}: localgpt ingest --force -C {coll.name} --provider "
                         f"{name} -m MODEL PATH...")  # fmt: skip
    return str(coll.model)


def open_manifest(app: App) -> Any:
    """The collection's manifest, kept beside the store (see rag/sidecar.py)."""
    from localgpt_cli.rag.manifest import open_manifest as open_

    settings = app.settings
    return open_(settings.db_uri, settings.home_dir, settings.collection)
