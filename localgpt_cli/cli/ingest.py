"""`localgpt ingest PATH...`: add files to a collection, incrementally; built for cron."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from localgpt_cli.cli.app import App, Finite, json_option, pass_app
from localgpt_cli.cli.kb import (
    chosen_embed_model,
    collection_options,
    embed_model_option,
    model_explicit,
    open_store,
)

if TYPE_CHECKING:
    from localgpt_cli.rag.ingest.run import Ingest

EPILOG = """\b
Examples:
  localgpt ingest ~/notes                       # folders are walked recursively
  localgpt ingest 'docs/**/*.md' README.md      # globs (quote them)
  localgpt ingest ~/src --include '*.py' --exclude tests
  localgpt ingest ~/notes --prune --dry-run     # what would change
  localgpt ingest -C papers ~/papers -m nomic-embed-text
  localgpt ingest ~/archive --engine ray --address 10.0.0.5:6379   # on a Ray cluster

\b
From cron (quiet unless something fails; exit 75 if a run is still going):
  */30 * * * * localgpt ingest ~/notes --prune --json >> ~/ingest.log

\b
Unchanged files cost one stat; edited files reuse the embeddings of unchanged passages;
a moved file is not embedded again. Hidden files and folders, symlinks inside folders,
binary and empty files, FIFOs and devices are skipped. --prune removes only documents
under the paths given. If Ollama is down, passages are stored without embeddings
(keyword search finds them), the run exits 3 and the next run embeds them; except that
a new collection is embedded in this process instead when the [local] extra is installed
(the summary says "fallback": true) unless --no-fallback or [ingest] local_fallback = false.

\b
Files are parsed and chunked by --workers processes (default: one a core) and the results
taken in order, so the events and what is stored are the same as with --workers 1; while
they parse, up to [ingest] concurrency embedding requests (default 2) are in flight.

\b
Each passage is embedded under its document's title (its first heading or first line,
a PDF's metadata title, a code file's name), so a passage keeps what its document is
about; search returns the passage exactly as written. Collections made before titles
are re-embedded once, by the next run.

\b
Exit codes: 0 ok, 3 Ollama unreachable (passages stored, embeddings pending),
5 some files failed (the rest committed), 6 invalid input or another embedding model,
75 another ingest holds the lock.
"""


def _size(value: str) -> int:
    """`20MB`, `500k`, `1.5G` or bytes -> bytes."""
    text = value.strip().upper().removesuffix("B")
    scale = 1
    for suffix, mult in (("K", 10**3), ("M", 10**6), ("G", 10**9)):
        if text.endswith(suffix):
            text, scale = text[:-1], mult
            break
    try:
        n = float(text) * scale
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a size (e.g. 20MB, 500k, 1048576)") from None
    if n <= 0:
        raise click.BadParameter("must be positive")
    return int(n)


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@collection_options
@embed_model_option
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files/folders (repeatable).")
@click.option(
    "--prune", is_flag=True, help="Remove documents whose files are gone (under PATH... only)."
)
@click.option("--force", is_flag=True, help="Re-ingest the files named (re-index with -m).")
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@click.option(
    "--wait-lock",
    type=Finite(min=0),
    default=0,
    show_default=True,
    metavar="SECONDS",
    help="Wait this long for another ingest to finish, then exit 75.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Texts per embedding request.",
)
@click.option(
    "--chunk-size", type=click.IntRange(min=1), help="Characters per chunk (800; code 400)."
)
@click.option(
    "--chunk-overlap", type=click.IntRange(min=0), help="Overlap in characters (120; code 60)."
)
@click.option(
    "--no-fallback",
    is_flag=True,
    help="With Ollama down, store a new collection's passages without embeddings "
    "instead of embedding them in this process.",
)
@click.option(
    "--ocr",
    "ocr_mode",
    type=click.Choice(["auto", "always", "never"]),
    help="Read scanned PDF pages and image files with Tesseract: auto (pages without a "
    "usable text layer; default, [ingest] ocr), always (every page), never. "
    "E.g. localgpt ingest ~/scans --ocr always",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    metavar="N",
    help="Processes that parse and chunk (default: the cores; [ingest] workers). "
    "e.g. --workers 1 parses in this process.",
)
@click.option(
    "--max-chunks",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="A document cut into more chunks fails with a message.",
)
@click.option(
    "--max-file-size",
    default="20MB",
    show_default=True,
    metavar="SIZE",
    help="Larger files fail with a message.",
)
@click.option(
    "--engine",
    type=click.Choice(["plain", "ray"]),
    default="plain",
    show_default=True,
    help="ray: parse, embed and write on a Ray cluster (the [ray] extra), e.g. "
    "--engine ray --address 10.0.0.5:6379.",
)
@click.option(
    "--address",
    metavar="HOST:PORT",
    help="The Ray cluster to join (ray start --head prints it); without it --engine ray "
    "starts one in this process.",
)
@click.option(
    "--ray-timeout",
    type=Finite(min=0, min_open=True),
    default=300,
    show_default=True,
    metavar="SECONDS",
    help="With --engine ray: exit 3 when the cluster has not answered (joined, or sent "
    "the next results) within SECONDS.",
)
@json_option
@pass_app
def ingest(
    app: App,
    paths: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    prune: bool,
    force: bool,
    dry_run: bool,
    wait_lock: float,
    batch_size: int,
    chunk_size: int | None,
    chunk_overlap: int | None,
    no_fallback: bool,
    ocr_mode: str | None,
    workers: int | None,
    max_chunks: int,
    max_file_size: str,
    engine: str,
    address: str | None,
    ray_timeout: float,
) -> None:
    """Add files, folders and globs to a collection (incremental, locked, cron-safe)."""
    from localgpt_cli.cli.ocr import ocr_settings
    from localgpt_cli.rag.chunk import resolve_limits
    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.store import remote

    _check_engine(engine, address)
    _tune_process(app)
    try:
        max_bytes = _size(max_file_size)
    except click.BadParameter as exc:
        exc.param_hint = "'--max-file-size'"
        raise
    for kind in ("text", "code"):  # a bad size/overlap is a usage error before any work
        resolve_limits(kind, chunk_size, chunk_overlap)
    options = IngestOptions(
        paths=paths,
        include=include,
        exclude=exclude,
        prune=prune,
        force=force,
        dry_run=dry_run,
        batch_size=batch_size,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        max_file_size=max_bytes,
        max_chunks=max_chunks,
        ocr=ocr_settings(app, ocr_mode),
        workers=_count(app, "ingest.workers", workers),
        concurrency=_count(app, "ingest.concurrency", None),
    )
    store = open_store(app, write=not dry_run)
    with remote.translated(store.uri):  # a failing object store: one line, its exit code
        fallback = not no_fallback and bool(app.settings.values["ingest.local_fallback"])
        engine_args = {"address": address, "idle": ray_timeout} if engine == "ray" else None
        _ingest(app, store, options, wait_lock, dry_run, fallback, engine_args)


def _check_engine(engine: str, address: str | None) -> None:
    """Refuse --address without the Ray engine; for the Ray engine, a missing extra or no
    cluster at the address is one line before any work."""
    if address and engine != "ray":
        raise click.UsageError("--address needs --engine ray.")
    if engine == "ray":
        from localgpt_cli.rag.ray import session

        session.check(address)


def node_embedder(flags: dict[str, Any], model: str) -> Any:
    """The embedder of a Ray actor (rag/ray/embed.py), built on its node as this command
    builds its own: the driver's flags over the node's environment and config file."""
    return App(flags=dict(flags)).embedder(documents=True, model=model)


def _count(app: App, key: str, flag: int | None) -> int:
    """A positive count from its flag, else the config file (`[ingest] workers`,
    `concurrency`); `ingest.workers` unset means the cores this process may use."""
    from localgpt_cli.errors import setting_error
    from localgpt_cli.rag.ingest.pool import default_workers

    if flag is not None:
        return flag
    value = app.settings.values[key]
    if value is None:
        return default_workers()
    if value < 1:
        where = app.settings.named(key)
        raise setting_error(where, f"{key} ({where}) must be 1 or more, not {value}.")
    return int(value)


def _ingest(app: App, store: Any, options: Any, wait_lock: float, dry_run: bool,
            may_fall_back: bool, engine_args: dict[str, Any] | None) -> None:  # fmt: skip
    from localgpt_cli.rag.ingest.run import Ingest

    model, fallback = chosen_embed_model(app), False
    if not model_explicit(app) and may_fall_back:
        model, fallback = _default_model(app, store)
    engine: Any = Ingest
    if engine_args is not None:
        from functools import partial

        from localgpt_cli.rag.ray.engine import RayIngest

        client = partial(node_embedder, dict(app.flags), model)
        engine = partial(RayIngest, node_client=client, **engine_args)
    run = engine(
        options,
        store=store,
        collection=app.settings.collection,
        model=model,
        model_explicit=model_explicit(app),
        client=app.embedder(documents=True, model=model),
        home=app.settings.home_dir,
        wait_lock=wait_lock,
        fallback=fallback,
    )
    _show_run(app, run, dry_run)
    _raise_for_outcome(run)


def _default_model(app: App, store: Any) -> tuple[str, bool]:
    """The defaulted embedding model, and whether it is the fallback: for a new collection
    with no Ollama reachable and the `[local]` extra installed, the in-process one (said
    on stderr, in the summary, and on the collection)."""
    from localgpt_cli.errors import OllamaUnreachable
    from localgpt_cli.llm import local

    model = chosen_embed_model(app)
    if local.is_local(model) or store.exists(app.settings.collection) or not local.available():
        return model, False
    try:
        app.client.list_models()
    except OllamaUnreachable:
        app.output.warn(
            "local_embedder",
            f"No Ollama at {app.settings.host}: embedding with {local.DEFAULT_LOCAL_MODEL} "
            "in this process; the collection is searched with it from now on "
            "(--no-fallback: store without embeddings until Ollama is back).",
        )
        return local.DEFAULT_LOCAL_MODEL, True
    return model, False


def _tune_process(app: App) -> None:
    """Settings of the libraries below, made before lancedb is first imported."""
    from localgpt_cli.heap import arrow_on_the_c_heap, bound_lance_buffers, pin_mmap_threshold

    if not app.debug:
        # LanceDB's Rust log goes straight to stderr (k-means notes while it trains the
        # vector index); a cron job mails whatever is printed, so only its errors show.
        # Read once, when lancedb is first imported, which has not happened yet.
        os.environ.setdefault("LANCEDB_LOG", "error")
    pin_mmap_threshold()  # keeps the run's memory flat: see localgpt_cli/heap.py
    bound_lance_buffers()  # the vector-index build's buffers: see localgpt_cli/heap.py
    arrow_on_the_c_heap()  # freed row buffers go back: see localgpt_cli/heap.py


def _show_run(app: App, run: Ingest, dry_run: bool) -> None:
    """Run the ingest, handing each event to the view; a missing embedding model is
    reported as such, with what was stored so far kept."""
    from localgpt_cli.errors import ModelNotFound
    from localgpt_cli.render.ingest import IngestView

    view = IngestView(app.output, dry_run)
    try:
        for event in run.run():
            view.show(event)
    except ModelNotFound as exc:
        profile = run.model.partition(":")[0]
        if ":" in run.model and profile in app.settings.profiles:
            raise ModelNotFound(
                f"Embedding model {run.model!r} is not offered by provider {profile!r}.",
                hint=f"See what it offers: localgpt models list --provider {profile}. "
                "What was stored so far is kept.",
            ) from exc
        raise ModelNotFound(
            f"Embedding model {run.model!r} is not available at {app.settings.host}.",
            hint=f"Pull it with: localgpt models pull {run.model} (or choose one with -m). "
            "What was stored so far is kept.",
        ) from exc
    finally:
        view.close()


def _raise_for_outcome(run: Ingest) -> None:
    """The exit code of a finished run: 3 when chunks wait for embeddings because the
    server is down, 5 when some files failed (the rest were committed), else 0."""
    from localgpt_cli.errors import OllamaUnreachable, PartialFailure

    summary = run.summary
    if run.down is not None and summary.pending_embeddings:
        raise OllamaUnreachable(
            f"{run.down.message} {summary.pending_embeddings} chunk(s) are stored without "
            "embeddings (keyword search finds them).",
            code=run.down.code,
            hint="The next ingest embeds them once Ollama is reachable.",
        )
    if summary.failed:
        raise PartialFailure(
            f"{summary.failed} file(s) failed to ingest; the others were committed.",
            hint="See the messages above; fix or --exclude those files.",
        )
