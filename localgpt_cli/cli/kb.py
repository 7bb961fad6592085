"""What the knowledge-base commands (ingest, docs, search) share: options and opening.

`-C/--collection`, `--db` and `-m/--embed-model` go through the settings (flags > env >
config file), so a cron line, a config file and a one-off flag all mean the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from localgpt_cli.cli.app import App

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


def embed_model_option(f: F) -> F:
    return click.option(
        "-m",
        "--embed-model",
        metavar="MODEL",
        expose_value=False,
        callback=_setter("embed_model"),
        help="Embedding model (default: the collection's, else nomic-embed-text).",
    )(f)


def open_store(app: App) -> Any:
    from localgpt_cli.rag.store import open_store as open_

    return open_(app.settings.db_uri)


def model_explicit(app: App) -> bool:
    """Whether the embedding model was chosen (flag, env or config) rather than defaulted:
    a defaulted model defers to the one the collection was built with."""
    return app.settings.sources.get("embed_model") != "default"


def open_manifest(app: App) -> Any:
    """The collection's manifest, kept beside the store (see rag/sidecar.py)."""
    from localgpt_cli.rag.manifest import open_manifest as open_

    settings = app.settings
    return open_(settings.db_uri, settings.home_dir, settings.collection)


def display_path(path: str) -> str:
    """A stored (absolute) path as a person wants to read it: relative to the current
    folder when inside it, `~/...` when inside the home folder."""
    import os

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    if cwd and path.startswith(cwd.rstrip(os.sep) + os.sep):
        return path[len(cwd.rstrip(os.sep)) + 1 :]
    home = os.path.expanduser("~")
    if home not in ("", "/") and path.startswith(home + os.sep):
        return "~" + path[len(home) :]
    return path
