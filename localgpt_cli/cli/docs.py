"""`localgpt docs`: list (the default), show, rm, stats, collections."""

from __future__ import annotations

from typing import Any

import click

from localgpt_cli.cli.app import App, Finite, json_option, pass_app
from localgpt_cli.cli.confirm import ask, refuse_without_terminal, yes_option
from localgpt_cli.cli.kb import (
    collection_options,
    open_manifest,
    open_store,
    resolve_document,
)
from localgpt_cli.render.docs import print_chunks
from localgpt_cli.render.search import ocr_keys
from localgpt_cli.render.tables import chunks, display_path, human_size, print_table, when

EPILOG = """\b
Examples:
  localgpt docs                          # same as: localgpt docs list
  localgpt docs list -C papers --json | jq -r 'select(.status=="failed").path'
  localgpt docs show notes/vpn.md        # its chunks, by path or id (a prefix will do)
  localgpt docs rm 3f2a9c notes/old.md
  localgpt docs stats
  localgpt docs collections
"""


@click.group(invoke_without_command=True, epilog=EPILOG)
@collection_options
@json_option
@click.pass_context
def docs(ctx: click.Context) -> None:
    """The documents of a collection: list, show, remove; stats and collections."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd)


def _collection(app: App) -> Any:
    return open_store(app).collection(app.settings.collection)


def _document_rows(app: App) -> list[dict[str, Any]]:
    """Stored documents joined with their manifest entries, plus files that failed."""
    from localgpt_cli.rag.manifest import FAILED

    coll = _collection(app)
    manifest = open_manifest(app)
    entries = manifest.ids()
    rows = []
    for doc in coll.documents():
        entry = entries.pop(doc.document_id, None)
        rows.append({
            "type": "document", "document_id": doc.document_id, "path": doc.path,
            "doc_type": doc.type, "chunks": doc.chunks, "pending": doc.pending,
            "status": "pending" if doc.pending else "ok",
            "ingested_at": entry.ingested_at if entry else None,
            "size": entry.size if entry else None,
        })  # fmt: skip
    failed = [e for e in manifest.entries.values() if e.status == FAILED]
    for e in failed:
        rows.append({
            "type": "document", "document_id": None, "path": e.path, "doc_type": e.type,
            "chunks": 0, "pending": 0, "status": "failed", "ingested_at": e.ingested_at,
            "size": e.size, "error": e.error,
        })  # fmt: skip
    return sorted(rows, key=lambda r: r["path"])


@docs.command("list", epilog="Example:\n\n  localgpt docs list --json | jq -r "
              "'select(.type==\"document\").path'")
@collection_options
@json_option
@pass_app
def list_cmd(app: App) -> None:
    """Documents: id, path, type, chunks, status (ok, pending, failed), ingested."""
    rows = _document_rows(app)
    if app.output.json:
        for row in rows:
            app.output.record(row)
        return
    table = [
        [
            (r["document_id"] or "-")[:12], display_path(r["path"]), r["doc_type"] or "",
            r["chunks"], r["status"] + (f" ({r['pending']})" if r["pending"] else ""),
            when(app.output, r["ingested_at"]),
        ]
        for r in rows
    ]  # fmt: skip
    print_table(
        app.output,
        ["ID", "PATH", "TYPE", "CHUNKS", "STATUS", "INGESTED"],
        table,
        empty=f"No documents in collection {app.settings.collection!r}. "
        "Add some with: localgpt ingest PATH...",
    )


@docs.command("show", epilog="Example:\n\n  localgpt docs show notes/vpn.md --json | jq -r "
              "'select(.type==\"chunk\").text'")
@click.argument("ref", metavar="ID|PATH")
@collection_options
@json_option
@pass_app
def show_cmd(app: App, ref: str) -> None:
    """The chunks of one document, in order, with page / heading / lines."""
    coll = _collection(app)
    doc_id, path = resolve_document(coll, ref)
    chunks = coll.chunks(doc_id)
    if app.output.json:
        for c in chunks:
            app.output.record({
                "type": "chunk", "document_id": doc_id, "path": c.path, "chunk": c.ordinal,
                "page": c.page, "heading": c.heading, "line_start": c.line_start,
                "line_end": c.line_end, "text": c.text, **ocr_keys(c.ocr_confidence),
            })  # fmt: skip
        return
    print_chunks(app.output, doc_id, path, chunks)


@docs.command("rm", epilog="Examples:\n\n\b\n  localgpt docs rm notes/old.md 3f2a9c\n"
              "  localgpt docs list --json | jq -r 'select(.type==\"document\" and "
              "(.path|startswith(\"/tmp/\"))).document_id' "
              "| xargs -r localgpt docs rm -y")  # fmt: skip
@click.argument("refs", nargs=-1, required=True, metavar="ID|PATH...")
@yes_option
@click.option("--wait-lock", type=Finite(min=0), default=0, metavar="SECONDS",
              help="Wait this long for a running ingest, then exit 75.")  # fmt: skip
@collection_options
@json_option
@pass_app
def rm_cmd(app: App, refs: tuple[str, ...], yes: bool, wait_lock: float) -> None:
    """Remove documents (their chunks and their manifest entries).

    Asks first on a terminal; without one, refuses (exit 2) unless -y. All or nothing:
    when any ID is unknown or ambiguous nothing is removed (exit 6). A file that is still
    under a folder you ingest comes back with the next ingest: exclude it there
    (--exclude) to keep it out.
    """
    from localgpt_cli.rag.ingest.document import document_event
    from localgpt_cli.rag.library import locked

    settings = app.settings
    coll = _collection(app)
    targets = dict(resolve_document(coll, ref) for ref in refs)
    counts = {d.document_id: d.chunks for d in coll.documents()}
    noun = "document" if len(targets) == 1 else "documents"
    refuse_without_terminal(yes, f"remove {len(targets)} {noun}")
    if not yes:
        for doc_id, path in targets.items():
            app.output.stderr.write(f"  {doc_id[:12]}  {display_path(path)} "
                                    f"({chunks(counts.get(doc_id, 0))})\n")  # fmt: skip
        if not ask(app, f"Remove {len(targets)} {noun}?"):
            return
    with locked(settings.db_uri, settings.home_dir, settings.collection, wait_lock) as library:
        library.remove(targets, lambda: coll.delete_documents(targets))
    for doc_id, path in targets.items():
        if app.output.json:
            app.output.record(document_event("removed", path, doc_id, chunks=counts.get(doc_id, 0)))
        else:
            app.output.info(f"removed {display_path(path)} ({chunks(counts.get(doc_id, 0))})")


@docs.command("stats", epilog="Example:\n\n  localgpt docs stats --json | jq "
              "'select(.type==\"stats\").health'")
@collection_options
@json_option
@pass_app
def stats_cmd(app: App) -> None:
    """Documents, chunks, pending embeddings, bytes on disk, model, dimension, indexes
    and their health (rows not indexed yet, a missing full-text index)."""
    st = _collection(app).stats()
    health = st.health
    assert health is not None
    record = {
        "type": "stats", "collection": st.name, "documents": st.documents, "chunks": st.rows,
        "pending": st.pending, "bytes": st.bytes, "model": st.model, "dim": st.dim,
        "version": st.version, "fragments": st.fragments,
        "indexes": [
            {"name": i.name, "type": i.type, "columns": i.columns,
             "indexed_rows": i.indexed_rows, "unindexed_rows": i.unindexed_rows}
            for i in st.indexes
        ],
        "health": {
            "ok": not health.needs_repair, "unindexed_rows": health.unindexed_rows,
            "fts_index": {"present": health.fts_present, "stale": health.fts_stale,
                          "indexed_rows": health.fts_indexed,
                          "unindexed_rows": health.fts_unindexed},
            "vector_index": {"present": health.vector_present, "due": health.vector_due,
                             "indexed_rows": health.vector_indexed,
                             "unindexed_rows": health.vector_unindexed},
        },
    }  # fmt: skip
    if app.output.json:
        app.output.record(record)
        return
    indexes = ", ".join(
        f"{i.name} ({i.type}, {i.indexed_rows} indexed"
        + (f", {i.unindexed_rows} not yet" if i.unindexed_rows else "")
        + ")"
        for i in st.indexes
    )
    rows = [
        ["collection", st.name],
        ["documents", f"{st.documents:,}"],
        ["chunks", f"{st.rows:,}"],
        ["pending embeddings", f"{st.pending:,}"],
        ["size on disk", human_size(st.bytes)],
        ["embedding model", st.model or "-"],
        ["dimension", st.dim or "-"],
        ["indexes", indexes or "-"],
        ["index health", _health_text(health)],
        ["version", st.version],
        ["fragments", st.fragments],
    ]
    print_table(app.output, ["", ""], rows, header=False)


def _health_text(health: Any) -> str:
    problem = health.problem()
    if problem is None:
        return "ok"
    return f"{problem}: the next ingest into this collection rebuilds it"


@docs.command("collections", epilog="Example:\n\n  localgpt docs collections --json")
@collection_options
@json_option
@pass_app
def collections_cmd(app: App) -> None:
    """Collections in the database: name, chunks, embedding model, dimension."""
    store = open_store(app)
    found = store.collections()  # none, without creating it, when the folder is missing
    if app.output.json:
        for c in found:
            app.output.record(
                {"type": "collection", "name": c.name, "chunks": c.rows, "model": c.model,
                 "dim": c.dim, "fallback": c.fallback}
            )  # fmt: skip
        return
    print_table(
        app.output,
        ["NAME", "CHUNKS", "MODEL", "DIM"],
        [[c.name, c.rows, _model_cell(c), c.dim or "-"] for c in found],
        empty=f"No collections in {store.uri}. Create one with: localgpt ingest PATH...",
    )


def _model_cell(c: Any) -> str:
    """The MODEL column: a collection bound to the in-process embedder because Ollama was
    down when it was made says so (re-index it with -m MODEL --force to change)."""
    if not c.model:
        return "-"
    return f"{c.model} (fallback: Ollama was down)" if c.fallback else c.model
