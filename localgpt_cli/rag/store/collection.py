"""Opening and creating collections, and the embedding-model binding check.

`Store` is a LanceDB database (the collections of one localgpt home, or a shared URI);
`Collection` is one of its tables, assembled from the parts in this package (writes,
reads, indexes, search), plus the rule that one collection holds the vectors of one
embedding model: vectors of two models are not comparable, so mixing them is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localgpt_cli.errors import InvalidInput, NotFound, UsageError
from localgpt_cli.rag.store import remote
from localgpt_cli.rag.store.deadline import Deadlined, within
from localgpt_cli.rag.store.indexes import Indexes, IndexHealth, IndexInfo
from localgpt_cli.rag.store.lancedb_import import import_lancedb
from localgpt_cli.rag.store.reads import Reads
from localgpt_cli.rag.store.rows import row_schema
from localgpt_cli.rag.store.search import Search
from localgpt_cli.rag.store.table import META_DIM, META_FALLBACK, META_MODEL, scan_all_arrow
from localgpt_cli.rag.store.uri import local_path
from localgpt_cli.rag.store.writes import Writes

COLLECTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# LanceDB's metadata cache for a store opened to write (ingest). Its default, 1 GiB, keeps
# the manifest of every version a run commits, each listing every fragment so far: the
# cache grows with the square of the commits (one a second while embeddings come in), and
# a writer never reads those versions again. Measured on 60 MB of the README's corpus with
# embeddings: 17-27 MB by the final optimize, 28-43 MB after it; capped at 4 MiB, 3 MB,
# run and optimize no slower (`python -m tests.bench.ingest_workers --memory`, README).
WRITER_METADATA_CACHE_BYTES = 8 << 20


def validate_collection_name(name: str) -> str:
    """Collection names become table (directory) names: keep them to a safe alphabet."""
    if not COLLECTION_NAME.fullmatch(name or ""):
        raise UsageError(
            f"Invalid collection name {name!r}.",
            hint="Use 1-64 letters, digits, '_' or '-'.",
        )
    return name


@dataclass
class CollectionInfo:
    """One line of `docs collections`."""

    name: str
    rows: int
    model: str | None
    dim: int | None
    fallback: bool  # created by an ingest that fell back to the in-process embedder


@dataclass
class CollectionStats:
    """What `docs stats` shows."""

    name: str
    rows: int
    documents: int
    pending: int
    bytes: int | None
    model: str | None
    dim: int | None
    version: int
    fragments: int
    indexes: list[IndexInfo] = field(default_factory=list)
    health: IndexHealth | None = None


def open_store(uri: str | Path, writer: bool = False) -> Store:
    """A store at `uri` (a local folder or an object-store URI); connects on first use.
    `writer`: opened to write many commits (ingest), with a small metadata cache."""
    return Store(str(uri), writer)


class Store:
    """A LanceDB database: the collections of one localgpt home (or a shared URI)."""

    def __init__(self, uri: str, writer: bool = False):
        self.uri = uri
        self.writer = writer
        self.session: Any = None  # a writer's LanceDB session, made when it connects
        self._db: Any = None

    def _session(self, lancedb: Any) -> Any:
        """The LanceDB session to connect with: a writer's has a bounded metadata cache
        (WRITER_METADATA_CACHE_BYTES); None is LanceDB's default."""
        if self.writer and self.session is None:
            self.session = lancedb.Session(metadata_cache_size_bytes=WRITER_METADATA_CACHE_BYTES)
        return self.session

    @property
    def db(self) -> Any:
        if self._db is None:
            lancedb = import_lancedb()

            if remote.is_remote(self.uri):
                self._db = self._connect_remote(lancedb)
                return self._db
            try:  # lancedb.connect creates a local folder that does not exist yet
                self._db = lancedb.connect(self.uri, session=self._session(lancedb))
            except (OSError, ValueError, RuntimeError) as exc:
                raise InvalidInput(
                    f"Cannot open the knowledge base at {self.uri}: {exc}",
                    hint="Check --db / LOCALGPT_DB.",
                ) from exc
        return self._db

    def _connect_remote(self, lancedb: Any) -> Deadlined:
        """The object store's database, every call of which is bounded (deadline.py)."""
        options = remote.storage_options(self.uri)
        try:
            session = self._session(lancedb)
            db = within(
                lambda: lancedb.connect(self.uri, storage_options=options, session=session),
                self.uri,
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise remote.store_error(exc, self.uri) from exc
        return Deadlined(db, self.uri)

    def names(self) -> list[str]:
        folder = local_path(self.uri)
        if folder is not None and not folder.is_dir():
            return []  # nothing stored yet: connecting would create the folder
        return sorted(self.db.list_tables().tables)

    def exists(self, name: str) -> bool:
        return validate_collection_name(name) in self.names()

    def collection(self, name: str, create: bool = False, dim: int | None = None) -> Collection:
        """Open collection `name`; with `create`, make it (with a vector column if `dim`)."""
        validate_collection_name(name)
        if name in self.names():
            return Collection(self.uri, name, self.db.open_table(name))
        if not create:
            raise NotFound(
                f"Collection {name!r} does not exist in {self.uri}.",
                hint="Ingest documents into it first: localgpt ingest -C "
                f"{name} PATH... (see: localgpt docs collections).",
            )
        table = self.db.create_table(name, schema=row_schema(dim), exist_ok=True)
        coll = Collection(self.uri, name, table)
        coll.ensure_fts_index()
        return coll

    def collections(self) -> list[CollectionInfo]:
        out = []
        for name in self.names():
            if not COLLECTION_NAME.fullmatch(name):
                continue  # a table somebody else put in the database
            coll = Collection(self.uri, name, self.db.open_table(name))
            out.append(CollectionInfo(name, coll.count(), coll.model, coll.dim,
                                      coll.made_by_fallback))
        return out

    def drop_collection(self, name: str) -> None:
        """Remove a collection and its files (for re-indexing with another model)."""
        validate_collection_name(name)
        if name not in self.names():
            raise NotFound(f"Collection {name!r} does not exist in {self.uri}.")
        self.db.drop_table(name)


class Collection(Writes, Reads, Indexes, Search):
    """One collection: its LanceDB table plus the rules for writing and searching it."""

    def check_model(self, model: str, dim: int | None = None) -> None:
        """Refuse to mix embedding models: vectors of two models are not comparable."""
        have_model, have_dim = self.model, self.dim
        model_differs = have_model is not None and have_model != model
        dim_differs = dim is not None and have_dim is not None and have_dim != dim
        if not (model_differs or dim_differs):
            return
        have = f"{have_model or 'an unknown model'} ({have_dim or '?'} dimensions)"
        want = f"{model} ({dim or '?'} dimensions)"
        raise InvalidInput(
            f"Collection {self.name!r} was embedded with {have}, not {want}.",
            hint=(
                f"Re-index it with {model}: localgpt ingest --force -C {self.name} "
                f"-m {model} PATH..., "
                f"or remove its documents first: localgpt docs rm -C {self.name} ID|PATH... "
                f"(searching it needs {have_model or 'its original model'})."
            ),
        )

    def set_model(self, model: str, dim: int | None = None, fallback: bool = False) -> None:
        """Record the embedding model (and dimension when known, and that it was the
        in-process fallback for an unreachable Ollama); refuses a different one
        unless the collection is empty (every document removed): then there is nothing to
        mix with, so the collection is re-bound (its vector column dropped if the dimension
        changes)."""
        if self.count() == 0:
            self._unbind(dim)
        self.check_model(model, dim)
        meta = self._metadata()
        updates: dict[str, str] = {}
        if meta.get(META_MODEL) != model:
            updates[META_MODEL] = model
        if dim is not None and meta.get(META_DIM) != str(dim):
            updates[META_DIM] = str(dim)
        if fallback and META_FALLBACK not in meta:
            updates[META_FALLBACK] = "1"
        if updates:
            self.table.update_field_metadata({"path": "chunk_id", "metadata": updates})
            self._changed()

    def _unbind(self, dim: int | None) -> None:
        meta = self._metadata()
        if META_MODEL in meta or META_DIM in meta or META_FALLBACK in meta:
            self.table.update_field_metadata(
                {"path": "chunk_id",
                 "metadata": {META_MODEL: None, META_DIM: None, META_FALLBACK: None}}
            )  # fmt: skip
        if self.has_vector_column() and dim is not None and self.dim != dim:
            self.table.drop_columns(["vector"])
        self._changed()

    def stats(self) -> CollectionStats:
        raw = self.table.stats()
        rows = self.count()
        pending = rows - self.count_with_vectors() if self.has_vector_column() else rows
        documents = scan_all_arrow(self.table.search().select(["document_id"]))
        return CollectionStats(
            name=self.name,
            rows=rows,
            documents=len(set(documents.column("document_id").to_pylist())),
            pending=pending,
            bytes=_dir_bytes(self.uri, self.name) or _stat(raw, "total_bytes"),
            model=self.model,
            dim=self.dim,
            version=self.version,
            fragments=int(_stat(_stat(raw, "fragment_stats") or {}, "num_fragments") or 0),
            indexes=self.indexes(),
            health=self.index_health(),
        )


def _stat(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _dir_bytes(uri: str, name: str) -> int | None:
    """Bytes on disk of a local table (all versions), None for object stores."""
    folder = local_path(uri)
    if folder is None:
        return None
    root = folder / f"{name}.lance"
    if not root.exists():
        return None
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
