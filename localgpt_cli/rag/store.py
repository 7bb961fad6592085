"""The knowledge-base store: one LanceDB table per collection (the only lancedb importer).

Everything LanceDB-specific lives here (schema, commits, indexes, query builders), so that
retrieval, ingest and the CLI talk to a small `Collection` API and swapping the database
touches one file. lancedb and pyarrow are imported inside functions: importing lancedb
costs about a second even without its REST namespace client (`lancedb_import`), which
`localgpt --help` and `localgpt chat` without retrieval must not pay.

Durability rules the ingest pipeline relies on:
- a document's rows are replaced by one `merge_insert` (one commit, one new table version),
  so a crash leaves each document either old or new;
- vectors may be missing (Ollama down): such rows are stored with a null vector, found by
  keyword search, and filled in later by `set_vectors` (again one commit per batch).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, NotFound, UsageError
from localgpt_cli.rag.lancedb_import import import_lancedb
from localgpt_cli.rag.titles import embed_body
from localgpt_cli.rag.types import Chunk

if TYPE_CHECKING:
    import pyarrow as pa

COLLECTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Below this many embedded rows search scans every vector exactly; from it on, ensure_indexes()
# builds the ANN index. Measured on 2 cores with 768-d clustered vectors (python -m
# tests.bench.search --flat-sweep 5000,10000,20000): the exact scan's p50 is 20 ms at 5k,
# 24 ms at 10k and 103 ms at 20k rows; the index answers in ~5 ms and builds in 0.2 s, 0.4 s
# and 2.1 s, with recall@10 1.00, 0.95 and 1.00. Below 20k it trains few partitions (one
# per 256 rows) and its recall margin is thin, while the exact scan stays near 100 ms or less.
VECTOR_INDEX_MIN_ROWS = 20_000

# The ANN index is IVF with 8-bit scalar quantization (IVF_SQ), chosen over IVF-PQ with
# tests/bench/search.py on clustered 768-d vectors (2 cores). At 1M rows IVF_SQ builds in
# 53-73 s where IVF-PQ took 200-290 s, and answers in p50 ~11 ms at recall@10 0.976 with no
# re-ranking, where PQ's coarse distances (recall 0.26 alone) needed 30x re-ranking to reach
# 0.96 at 45 ms. A 2x re-rank with the exact vectors lifts SQ to recall 1.00: p50 7.9 ms at
# 100k and 12.7 ms at 1M. Training samples 64 rows a partition for 10 k-means rounds:
# 100k rows build in 6-8 s, against 102 s with IVF-PQ's defaults (256 rows, 50 rounds), for
# the same recall, and the sample bounds the training memory. The index takes ~0.8 KB a
# row on disk (PQ: 48 bytes), the price of the exact-enough distances.
NPROBES = 20
REFINE_FACTOR = 2
# An IVF-PQ index left by an earlier version is searched with the re-ranking it needed
# until the next ingest replaces it (see `_index_outdated`).
REFINE_FACTOR_PQ = 30
VECTOR_INDEX_TYPE = "IVF_SQ"
INDEX_KMEANS_ROUNDS = 10
INDEX_SAMPLE_RATE = 64  # training rows a partition
# Retrain the ANN index when the table has grown this many times since it was trained.
INDEX_RETRAIN_GROWTH = 4

# Text hashes per `IN (...)` filter of the embedding-cache lookup: keeps each SQL filter short.
_FILTER_BATCH = 500

# The full-text index's tokenizer, spelled out rather than left to LanceDB's defaults (which
# may change): English stemming and stop words. On Cranfield with 500/80 chunks
# (tests/bench/retrieval.py --tune) keyword nDCG@10 is 0.323 with neither, 0.334 with stop
# words only, 0.345 with stemming only and 0.357 with both (R@100 0.669 -> 0.731).
FTS_OPTIONS: dict[str, Any] = {
    "base_tokenizer": "simple",
    "language": "English",
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "ascii_folding": True,
}

_META_MODEL = "localgpt:embed_model"
_META_DIM = "localgpt:embed_dim"
_META_INDEX_ROWS = "localgpt:vector_index_rows"  # rows the ANN index was trained on
_META_PENDING = "localgpt:pending"  # "1" while rows without a vector may exist
_FTS_INDEX = "text_idx"
_VECTOR_INDEX = "vector_idx"

# Columns returned by searches: everything but the vector, which is large and not shown.
RESULT_COLUMNS = (
    "chunk_id",
    "document_id",
    "path",
    "type",
    "ordinal",
    "text",
    "page",
    "heading",
    "line_start",
    "line_end",
)


def text_hash(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes: the embedding-cache key when `text` is what is
    embedded (`embed_hash`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_hash(chunk: Chunk) -> str:
    """The embedding-cache key of a chunk, stored in its `text_hash` column: the hash of
    what is embedded (title and text, `titles.embed_body`), not of the text alone, so a
    changed title re-embeds and an unchanged one reuses the vector. A chunk embedded
    without a title (a table from before titles, a document's first chunk) hashes as its
    bare text, as it always did."""
    return text_hash(embed_body(chunk.title, chunk.text))


def chunk_id(document_id: str, ordinal: int) -> str:
    """The primary key of a chunk row: stable across re-ingests of an unchanged document."""
    return f"{document_id}:{ordinal}"


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters: quotes doubled, so a path with `'` is safe."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')` with every value escaped."""
    return f"{column} IN ({', '.join(sql_string(v) for v in values)})"


def validate_collection_name(name: str) -> str:
    """Collection names become table (directory) names: keep them to a safe alphabet."""
    if not COLLECTION_NAME.fullmatch(name or ""):
        raise UsageError(
            f"Invalid collection name {name!r}.",
            hint="Use 1-64 letters, digits, '_' or '-'.",
        )
    return name


def row_schema(dim: int | None) -> pa.Schema:
    """The table schema; without `dim` there is no vector column yet (added with the first
    vectors, because the dimension is only known once the embedding model has answered)."""
    import pyarrow as pa

    fields = [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("type", pa.string()),
        pa.field("ordinal", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("page", pa.int32()),
        pa.field("heading", pa.string()),
        pa.field("line_start", pa.int32()),
        pa.field("line_end", pa.int32()),
        pa.field("text_hash", pa.string()),
        pa.field("title", pa.string()),
    ]
    if dim is not None:
        fields.append(vector_field(dim))
    return pa.schema(fields)


def vector_field(dim: int) -> pa.Field:
    import pyarrow as pa

    return pa.field("vector", pa.list_(pa.float32(), dim), nullable=True)


@dataclass
class CollectionInfo:
    """One line of `docs collections`."""

    name: str
    rows: int
    model: str | None
    dim: int | None


@dataclass
class DocumentSummary:
    """One line of `docs list`: a document as the store sees it."""

    document_id: str
    path: str
    type: str
    chunks: int
    pending: int  # chunks stored without a vector

    @property
    def has_vectors(self) -> bool:
        return self.pending == 0


@dataclass
class PendingChunk:
    """A stored chunk still waiting for its embedding."""

    chunk_id: str
    text: str
    text_hash: str
    title: str | None = None  # embedded with the text: the input is rebuilt from both


@dataclass
class IndexInfo:
    name: str
    type: str
    columns: list[str]
    indexed_rows: int | None
    unindexed_rows: int | None


@dataclass
class IndexHealth:
    """Whether the indexes cover the rows: what `docs stats` reports and ingest repairs.

    A run killed before its final `optimize()` leaves rows the indexes do not cover yet
    (still searched, by a slower scan), or no full-text index at all (killed between
    creating a table and indexing it): keyword search then matches words without the
    index's stemming and stop words, so "observation" no longer finds "observations".
    Nothing else would notice, since a re-run with nothing changed does not optimize.
    """

    rows: int
    fts_present: bool
    fts_indexed: int
    fts_unindexed: int
    vector_present: bool
    vector_indexed: int
    vector_unindexed: int
    vector_due: bool  # the ANN index should be built (or retrained) now

    @property
    def fts_stale(self) -> bool:
        """The full-text index exists but leaves rows out."""
        return self.fts_present and self.fts_unindexed > 0

    @property
    def unindexed_rows(self) -> int:
        """Rows some index does not cover yet (every row when the FTS index is missing)."""
        fts = self.fts_unindexed if self.fts_present else self.rows
        return max(fts, self.vector_unindexed if self.vector_present else 0)

    @property
    def needs_repair(self) -> bool:
        return not self.fts_present or self.unindexed_rows > 0 or self.vector_due

    def problem(self) -> str | None:
        """What is wrong, in a few words (None when nothing is)."""
        if not self.fts_present:
            return "no full-text index"
        if self.unindexed_rows:
            return f"{self.unindexed_rows:,} rows not indexed yet"
        if self.vector_due:
            return "a vector index due to be (re)built"
        return None


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


@dataclass
class StoredRow:
    """A search candidate as the store returns it: chunk fields plus the side's raw score."""

    chunk: Chunk
    chunk_id: str
    score: float  # cosine similarity (vector side) or BM25 score (keyword side)


def open_store(uri: str | Path) -> Store:
    """A store at `uri` (a local folder or an object-store URI); connects on first use."""
    return Store(str(uri))


class Store:
    """A LanceDB database: the collections of one localgpt home (or a shared URI)."""

    def __init__(self, uri: str):
        self.uri = uri
        self._db: Any = None

    @property
    def db(self) -> Any:
        if self._db is None:
            lancedb = import_lancedb()

            try:  # lancedb.connect creates a local folder that does not exist yet
                self._db = lancedb.connect(self.uri)
            except (OSError, ValueError, RuntimeError) as exc:
                raise InvalidInput(
                    f"Cannot open the knowledge base at {self.uri}: {exc}",
                    hint="Check --db / LOCALGPT_DB.",
                ) from exc
        return self._db

    def names(self) -> list[str]:
        if "://" not in self.uri and not Path(self.uri).is_dir():
            return []  # nothing stored yet: connecting would create the folder
        return sorted(self.db.list_tables().tables)

    def exists(self, name: str) -> bool:
        return validate_collection_name(name) in self.names()

    def collection(self, name: str, create: bool = False, dim: int | None = None) -> Collection:
        """Open collection `name`; with `create`, make it (with a vector column if `dim`)."""
        validate_collection_name(name)
        if name in self.names():
            return Collection(self, name, self.db.open_table(name))
        if not create:
            raise NotFound(
                f"Collection {name!r} does not exist in {self.uri}.",
                hint="Ingest documents into it first: localgpt ingest -C "
                f"{name} PATH... (see: localgpt docs collections).",
            )
        table = self.db.create_table(name, schema=row_schema(dim), exist_ok=True)
        coll = Collection(self, name, table)
        coll.ensure_fts_index()
        return coll

    def collections(self) -> list[CollectionInfo]:
        out = []
        for name in self.names():
            if not COLLECTION_NAME.fullmatch(name):
                continue  # a table somebody else put in the database
            coll = Collection(self, name, self.db.open_table(name))
            out.append(CollectionInfo(name, coll.count(), coll.model, coll.dim))
        return out

    def drop_collection(self, name: str) -> None:
        """Remove a collection and its files (for re-indexing with another model)."""
        validate_collection_name(name)
        if name not in self.names():
            raise NotFound(f"Collection {name!r} does not exist in {self.uri}.")
        self.db.drop_table(name)


class Collection:
    """One collection: its LanceDB table plus the rules for writing and searching it."""

    def __init__(self, store: Store, name: str, table: Any):
        self.store = store
        self.name = name
        self.table = table
        self._schema: Any = None
        self._index_names: set[str] | None = None
        self._index_type: str | None = None
        self._loop: Any = None
        self._async_table: Any = None
        self._reader_stale = False

    # -- cached table state -----------------------------------------------------------
    # Every `table.schema` or `list_indices()` is a round trip through lancedb's event-loop
    # thread (milliseconds on a busy machine); a search asked for them several times. They
    # only change through this object's writes (LanceDB does not re-read a table another
    # process changed unless asked to), so each write clears the cache.

    @property
    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = self.table.schema
        return self._schema

    def index_names(self) -> set[str]:
        if self._index_names is None:
            self._index_names = {cfg.name for cfg in self.table.list_indices()}
        return self._index_names

    def _refine_factor(self) -> int | None:
        """The re-ranking factor for the ANN index (None: no index, exact scan)."""
        if not self.has_vector_index():
            return None
        if self._index_type is None:
            stats = self.table.index_stats(_VECTOR_INDEX)
            self._index_type = str(stats.index_type) if stats is not None else ""
        return REFINE_FACTOR if self._index_type == VECTOR_INDEX_TYPE else REFINE_FACTOR_PQ

    def _changed(self) -> None:
        self._schema = None
        self._index_names = None
        self._index_type = None
        self._reader_stale = True

    # -- metadata -------------------------------------------------------------------

    def _metadata(self) -> dict[str, str]:
        raw = self.schema.field("chunk_id").metadata or {}
        return {k.decode(): v.decode() for k, v in raw.items()}

    @property
    def model(self) -> str | None:
        """The embedding model the stored vectors came from (None before the first ingest)."""
        return self._metadata().get(_META_MODEL)

    @property
    def dim(self) -> int | None:
        """The vector dimension, from the vector column (None until vectors were stored)."""
        schema = self.schema
        if "vector" in schema.names:
            return int(schema.field("vector").type.list_size)
        recorded = self._metadata().get(_META_DIM)
        return int(recorded) if recorded else None

    @property
    def version(self) -> int:
        return int(self.table.version)

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

    def set_model(self, model: str, dim: int | None = None) -> None:
        """Record the embedding model (and dimension when known); refuses a different one
        unless the collection is empty (every document removed): then there is nothing to
        mix with, so the collection is re-bound (its vector column dropped if the dimension
        changes)."""
        if self.count() == 0:
            self._unbind(dim)
        self.check_model(model, dim)
        meta = self._metadata()
        updates: dict[str, str] = {}
        if meta.get(_META_MODEL) != model:
            updates[_META_MODEL] = model
        if dim is not None and meta.get(_META_DIM) != str(dim):
            updates[_META_DIM] = str(dim)
        if updates:
            self.table.update_field_metadata({"path": "chunk_id", "metadata": updates})
            self._changed()

    def pending_marked(self) -> bool | None:
        """Whether rows without a vector may exist, as ingest last recorded it (None: never
        recorded). Counting null vectors reads the whole vector column (~0.8 s at 60k rows),
        which an unchanged cron re-run must not pay."""
        value = self._metadata().get(_META_PENDING)
        return None if value is None else value == "1"

    def mark_pending(self, pending: bool) -> None:
        """Record whether rows without a vector may exist; set before writing such rows, so
        a crash can only leave the mark on when nothing is pending (costing one count)."""
        value = "1" if pending else "0"
        if self._metadata().get(_META_PENDING) != value:
            self.table.update_field_metadata(
                {"path": "chunk_id", "metadata": {_META_PENDING: value}}
            )
            self._changed()

    def _mark_if_missing(self, vectors: Sequence[Any] | None) -> None:
        """Mark the collection pending before rows without a vector are written, so a
        crash between the two cannot leave such rows behind a "nothing pending" mark."""
        if vectors is None or any(v is None for v in vectors):
            self.mark_pending(True)

    def _unbind(self, dim: int | None) -> None:
        meta = self._metadata()
        if _META_MODEL in meta or _META_DIM in meta:
            self.table.update_field_metadata(
                {"path": "chunk_id", "metadata": {_META_MODEL: None, _META_DIM: None}}
            )
        if self.has_vector_column() and dim is not None and self.dim != dim:
            self.table.drop_columns(["vector"])
        self._changed()

    # -- writes ---------------------------------------------------------------------

    def _ensure_vector_column(self, dim: int) -> None:
        have = self.dim
        if have is None or ("vector" not in self.schema.names and have == dim):
            # First vectors of this collection: add the (all-null) column, a schema-only commit.
            self.table.add_columns(vector_field(dim))
            self._changed()
        elif have != dim:
            raise InvalidInput(
                f"Vectors of {dim} dimensions cannot go into collection {self.name!r}, "
                f"which holds {have}-dimension vectors.",
                hint=f"Re-index it: localgpt ingest --force -C {self.name} PATH...",
            )

    def _ensure_title_column(self) -> None:
        """Tables made before titles lack the column: add it (all null, a schema-only
        commit). Their rows keep their vectors, keyed by the bare text; the next ingest
        re-embeds each chunk once, with its title (the manifest's options mark changed)."""
        import pyarrow as pa

        if "title" not in self.schema.names:
            self.table.add_columns(pa.field("title", pa.string()))
            self._changed()

    def _rows_table(self, chunks: Sequence[Chunk], vectors: Sequence[Any] | None) -> pa.Table:
        import numpy as np
        import pyarrow as pa

        if vectors is not None and len(vectors) != len(chunks):
            raise ValueError("one vector (or None) per chunk")
        dims = {len(v) for v in (vectors if vectors is not None else ()) if v is not None}
        if len(dims) > 1:
            raise InvalidInput(f"Vectors of different dimensions {sorted(dims)} in one batch.")
        if dims:
            self._ensure_vector_column(dims.pop())
        self._ensure_title_column()
        schema = row_schema(self.dim if "vector" in self.schema.names else None)
        columns: dict[str, Any] = {
            "chunk_id": [chunk_id(c.document_id, c.ordinal) for c in chunks],
            "document_id": [c.document_id for c in chunks],
            "path": [c.path for c in chunks],
            "type": [c.type for c in chunks],
            "ordinal": [c.ordinal for c in chunks],
            "text": [c.text for c in chunks],
            "page": [c.page for c in chunks],
            "heading": [c.heading for c in chunks],
            "line_start": [c.line_start for c in chunks],
            "line_end": [c.line_end for c in chunks],
            "text_hash": [embed_hash(c) for c in chunks],
            "title": [c.title for c in chunks],
        }
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema if f.name != "vector"]
        if "vector" in schema.names:
            if vectors is None:
                vectors = [None] * len(chunks)
            arrays.append(_vector_array(np, pa, vectors, self.dim or 0))
        # In the table's column order: a table from before `title` has it last.
        return pa.Table.from_arrays(arrays, schema=schema).select(self.schema.names)

    def replace_document(
        self,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float] | None] | None = None,
    ) -> int:
        """Make `chunks` the document's rows, in one commit; returns the new table version.

        `vectors[i]` is the embedding of `chunks[i]`, or None when it is not known yet
        (Ollama down): the row is stored without one and `pending()` lists it. Rows of the
        document that are not in `chunks` any more (the document got shorter) are deleted
        by the same commit.
        """
        if any(c.document_id != document_id for c in chunks):
            raise ValueError("every chunk must belong to the document being replaced")
        self.write_documents([document_id], chunks, vectors, append=False)
        return self.version

    def write_documents(
        self,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: Sequence[Any] | None,
        *,
        append: bool,
    ) -> None:
        """Make `chunks` the rows of all of `document_ids`, in one commit.

        Ingest groups small documents into one commit because each commit costs tens of
        milliseconds (a per-file commit dominated a run over many small files); the group
        is still atomic, so a crash leaves each document old or new. With `append` the
        caller knows none of the documents is stored, so a plain append replaces the
        merge's join over the whole table. A document with no chunks is deleted.
        """
        ids = sorted(set(document_ids))
        if not chunks:
            self.delete_documents(ids)
            return
        self._mark_if_missing(vectors)
        data = self._rows_table(chunks, vectors)
        if append:
            self.table.add(data, on_bad_vectors="null")
        else:
            (
                self.table.merge_insert("chunk_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(sql_in("document_id", ids))
                .execute(data, on_bad_vectors="null")
            )
        self._reader_stale = True

    def move_document(self, document_id: str, path: str) -> None:
        """Give a document's rows a new path (a file moved: same text, same vectors)."""
        self.table.update(where=f"document_id = {sql_string(document_id)}", values={"path": path})
        self._reader_stale = True

    def document_ids(self) -> set[str]:
        """Ids of the stored documents (one scan of one column)."""
        table = _scan_all_arrow(self.table.search().select(["document_id"]))
        return set(table.column("document_id").unique().to_pylist())

    def document_hashes(self, document_ids: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
        """Path and chunk `text_hash`es in order, per document: what ingest compares a file's
        fresh chunks with when the manifest entry that vouched for them was lost."""
        wanted = sorted(set(document_ids))
        rows: list[dict[str, Any]] = []
        for start in range(0, len(wanted), _FILTER_BATCH):
            query = (
                self.table.search()
                .where(sql_in("document_id", wanted[start : start + _FILTER_BATCH]))
                .select(["document_id", "path", "ordinal", "text_hash"])
            )
            rows += _scan_all(query)
        out: dict[str, tuple[str, list[str]]] = {}
        for r in sorted(rows, key=lambda r: (r["document_id"], r["ordinal"])):
            out.setdefault(r["document_id"], (r["path"], []))[1].append(r["text_hash"])
        return out

    def embedded_hashes(self) -> set[str]:
        """Text hashes of the chunks stored with a vector: what the embedding cache holds."""
        if not self.has_vector_column():
            return set()
        query = self.table.search().select(["text_hash"])
        if self.pending_marked() is not False:  # the filter reads the whole vector column
            query = query.where("vector IS NOT NULL")
        return set(_scan_all_arrow(query).column("text_hash").unique().to_pylist())

    def delete_documents(self, document_ids: Iterable[str]) -> int:
        """Delete every row of these documents in one commit; returns rows deleted."""
        ids = sorted(set(document_ids))
        if not ids:
            return 0
        where = sql_in("document_id", ids)
        if self.table.count_rows(where) == 0:
            return 0  # a delete that matches nothing would still write a new version
        deleted = int(self.table.delete(where).num_deleted_rows)
        self._reader_stale = True
        return deleted

    def set_vectors(self, chunk_ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> int:
        """Fill in embeddings of stored chunks (one commit); returns rows updated."""
        import numpy as np
        import pyarrow as pa

        if len(chunk_ids) != len(vectors):
            raise ValueError("one vector per chunk id")
        if not chunk_ids:
            return 0
        dims = {len(v) for v in vectors}
        if len(dims) > 1:
            raise InvalidInput(f"Vectors of different dimensions {sorted(dims)} in one batch.")
        self._ensure_vector_column(dims.pop())
        dim = self.dim or 0
        data = pa.Table.from_arrays(
            [pa.array(list(chunk_ids), pa.string()), _vector_array(np, pa, vectors, dim)],
            schema=pa.schema(
                [pa.field("chunk_id", pa.string(), nullable=False), vector_field(dim)]
            ),
        )
        result = self.table.merge_insert("chunk_id").when_matched_update_all().execute(data)
        self._reader_stale = True
        return int(result.num_updated_rows)

    # -- reads ----------------------------------------------------------------------

    def count(self, where: str | None = None) -> int:
        return int(self.table.count_rows(where))

    def has_vector_column(self) -> bool:
        return "vector" in self.schema.names

    def has_vectors(self) -> bool:
        """Whether vector search can find anything. Asked before every search, so it must
        not count: counting non-null vectors reads the whole column (~170 ms at 100k x 768);
        the index, or the first non-null row, answers at once."""
        if not self.has_vector_column():
            return False
        if self.has_vector_index():
            return True
        if self.pending_marked() is False:  # every row has its vector: the metadata says so
            return self.count() > 0
        query = self.table.search().where("vector IS NOT NULL").select(["chunk_id"]).limit(1)
        return query.to_arrow().num_rows > 0

    def count_with_vectors(self) -> int:
        """Rows that have their vector.

        Counting non-null vectors reads the whole vector column (2.9 s and 340 MB at 460k
        768-d rows, paid twice by every end-of-run index check), so a collection marked as
        having nothing pending is counted from the table's metadata instead.
        """
        if not self.has_vector_column():
            return 0
        if self.pending_marked() is False:
            return self.count()
        return self.count("vector IS NOT NULL")

    def pending(self, limit: int | None = None) -> list[PendingChunk]:
        """Chunks stored without a vector, oldest document order first."""
        where = "vector IS NULL" if self.has_vector_column() else None
        columns = ["chunk_id", "text", "text_hash"]
        if "title" in self.schema.names:
            columns.append("title")
        query = self.table.search().select(columns)
        if where:
            query = query.where(where)
        rows = query.limit(limit).to_arrow().to_pylist() if limit else _scan_all(query)
        return [
            PendingChunk(r["chunk_id"], r["text"], r["text_hash"], r.get("title")) for r in rows
        ]

    def lookup_vectors(self, text_hashes: Iterable[str]) -> dict[str, list[float]]:
        """The embedding cache: stored vectors keyed by `embed_hash` (of what was embedded)."""
        if not self.has_vector_column():
            return {}
        wanted = sorted(set(text_hashes))
        found: dict[str, list[float]] = {}
        for start in range(0, len(wanted), _FILTER_BATCH):
            batch = wanted[start : start + _FILTER_BATCH]
            query = (
                self.table.search()
                .where(f"vector IS NOT NULL AND {sql_in('text_hash', batch)}")
                .select(["text_hash", "vector"])
            )
            for row in _scan_all(query):
                found.setdefault(row["text_hash"], row["vector"])
        return found

    def documents(self) -> list[DocumentSummary]:
        """One summary per document, by path."""
        table = _scan_all_arrow(self.table.search().select(["document_id", "path", "type"]))
        if table.num_rows == 0:
            return []
        grouped = table.group_by(["document_id", "path", "type"]).aggregate(
            [("document_id", "count")]
        )
        pending: dict[str, int] = {}
        if not self.has_vector_column():
            pending = {r["document_id"]: r["document_id_count"] for r in grouped.to_pylist()}
        elif self.pending_marked() is not False:  # the null filter reads every vector
            nulls = _scan_all_arrow(
                self.table.search().where("vector IS NULL").select(["document_id"])
            )
            for row in (
                nulls.group_by("document_id").aggregate([("document_id", "count")]).to_pylist()
            ):
                pending[row["document_id"]] = row["document_id_count"]
        out = [
            DocumentSummary(
                r["document_id"],
                r["path"],
                r["type"],
                r["document_id_count"],
                pending.get(r["document_id"], 0),
            )
            for r in grouped.to_pylist()
        ]
        return sorted(out, key=lambda d: (d.path, d.document_id))

    def chunks(self, document_id: str) -> list[Chunk]:
        """A document's chunks in order (empty if the document is not stored)."""
        query = (
            self.table.search()
            .where(f"document_id = {sql_string(document_id)}")
            .select(list(RESULT_COLUMNS))
        )
        rows = sorted(_scan_all(query), key=lambda r: r["ordinal"])
        return [_row_chunk(r) for r in rows]

    def indexes(self) -> list[IndexInfo]:
        out = []
        for cfg in self.table.list_indices():
            stats = self.table.index_stats(cfg.name)
            out.append(
                IndexInfo(
                    cfg.name,
                    str(cfg.index_type),
                    list(cfg.columns),
                    getattr(stats, "num_indexed_rows", None),
                    getattr(stats, "num_unindexed_rows", None),
                )
            )
        return out

    def stats(self) -> CollectionStats:
        raw = self.table.stats()
        rows = self.count()
        pending = rows - self.count_with_vectors() if self.has_vector_column() else rows
        documents = _scan_all_arrow(self.table.search().select(["document_id"]))
        return CollectionStats(
            name=self.name,
            rows=rows,
            documents=len(set(documents.column("document_id").to_pylist())),
            pending=pending,
            bytes=_dir_bytes(self.store.uri, self.name) or _stat(raw, "total_bytes"),
            model=self.model,
            dim=self.dim,
            version=self.version,
            fragments=int(_stat(_stat(raw, "fragment_stats") or {}, "num_fragments") or 0),
            indexes=self.indexes(),
            health=self.index_health(),
        )

    # -- indexes and maintenance ----------------------------------------------------

    def ensure_fts_index(self) -> None:
        """The native full-text (BM25) index on `text`; rows added later are still
        searched (unindexed fragments are scanned) until `optimize()` folds them in."""
        if _FTS_INDEX in self.index_names():
            return
        self.build_fts_index()

    def build_fts_index(self, **options: Any) -> None:
        """(Re)build the full-text index; `options` override FTS_OPTIONS (benchmarks)."""
        from lancedb.index import FTS

        config = FTS(**{**FTS_OPTIONS, **options})
        self.table.create_index("text", config=config, name=_FTS_INDEX, replace=True)
        self._changed()

    def has_vector_index(self) -> bool:
        return _VECTOR_INDEX in self.index_names()

    def has_fts_index(self) -> bool:
        return _FTS_INDEX in self.index_names()

    def index_health(self) -> IndexHealth:
        """How far the indexes cover the rows (see IndexHealth); a few metadata reads."""
        fts = self._index_rows(_FTS_INDEX)
        vector = self._index_rows(_VECTOR_INDEX)
        return IndexHealth(
            rows=self.count(),
            fts_present=fts is not None,
            fts_indexed=fts[0] if fts else 0,
            fts_unindexed=fts[1] if fts else 0,
            vector_present=vector is not None,
            vector_indexed=vector[0] if vector else 0,
            vector_unindexed=vector[1] if vector else 0,
            vector_due=self._vector_index_due(VECTOR_INDEX_MIN_ROWS)[0],
        )

    def _index_rows(self, name: str) -> tuple[int, int] | None:
        """(indexed, unindexed) rows of index `name`, None when it does not exist."""
        if name not in self.index_names():
            return None
        stats = self.table.index_stats(name)
        if stats is None:
            return None
        return int(stats.num_indexed_rows or 0), int(stats.num_unindexed_rows or 0)

    def ensure_indexes(self, min_rows: int = VECTOR_INDEX_MIN_ROWS) -> bool:
        """Create the FTS index if missing, and the ANN index once `min_rows` rows have
        vectors. Returns True when it built the vector index now."""
        self.ensure_fts_index()
        due, rows = self._vector_index_due(min_rows)
        if not due:
            return False
        self.build_vector_index(rows)
        return True

    def _vector_index_due(self, min_rows: int) -> tuple[bool, int | None]:
        """Whether the ANN index should be built or retrained now, and the rows with
        vectors when they had to be counted."""
        if self.has_vector_index():
            return self._index_outdated(), None
        rows = self.count_with_vectors()
        return rows >= min_rows, rows

    def _index_outdated(self) -> bool:
        """Whether the ANN index is of an older kind, or the table grew
        INDEX_RETRAIN_GROWTH-fold since the index was trained.

        Partitions are sized for the rows at training time; new rows are appended to them
        by `optimize()`, so after a 4x growth each probed list is 4x longer than planned and
        the centroids describe an older corpus. Retraining at each 4x step keeps the total
        build work linear in the final size (a geometric series).
        """
        stats = self.table.index_stats(_VECTOR_INDEX)
        if stats is None:
            return False
        if str(stats.index_type) != VECTOR_INDEX_TYPE:
            return True
        trained = int(self._metadata().get(_META_INDEX_ROWS) or 0)
        rows = int(stats.num_indexed_rows or 0) + int(stats.num_unindexed_rows or 0)
        return bool(trained) and rows >= INDEX_RETRAIN_GROWTH * trained

    def build_vector_index(self, rows: int | None = None) -> None:
        """(Re)build the IVF_SQ index over the vectors (cosine); see NPROBES for why SQ.

        Partitions ~ sqrt(rows) keep each probed list small; `rows` is the count of rows
        with vectors when the caller has it (counting may read every vector).
        """
        from lancedb.index import IvfSq

        rows = max(self.count_with_vectors() if rows is None else rows, 1)
        # LanceDB trains at most one partition per 256 vectors (and warns otherwise).
        partitions = max(1, min(round(math.sqrt(rows)), rows // 256))
        self.table.create_index(
            "vector",
            config=IvfSq(
                distance_type="cosine",
                num_partitions=partitions,
                max_iterations=INDEX_KMEANS_ROUNDS,
                sample_rate=INDEX_SAMPLE_RATE,
            ),
            name=_VECTOR_INDEX,
            replace=True,
        )
        self.table.update_field_metadata(
            {"path": "chunk_id", "metadata": {_META_INDEX_ROWS: str(rows)}}
        )
        self._changed()

    def optimize(self, cleanup_older_than: timedelta = timedelta(hours=1)) -> None:
        """Compact small fragments, fold new rows into the indexes, drop old versions, then
        build or retrain the ANN index when it is due.

        Each `replace_document` commit adds a fragment; a run over thousands of files would
        otherwise leave thousands of them and slow every scan. The ANN index is built after
        the compaction, on the rows where they will stay: compaction rewrites the rows of an
        index built before it, and that remapped index searched in 10.8 ms against 7.7 ms at
        100k rows, and at 1M in 41 ms at recall 0.976 against 13 ms at 1.00. Versions older
        than an hour are removed: search processes are short-lived and ingest holds the
        lock, so no reader is still on them.
        """
        self.ensure_fts_index()
        self.table.optimize(cleanup_older_than=cleanup_older_than)
        self.ensure_indexes()
        self._changed()

    # -- search ---------------------------------------------------------------------
    # Searches go through LanceDB's async API on an event loop owned by this collection:
    # one round trip per query instead of the half-dozen the sync wrappers make (each
    # `search()` re-reads the schema through lancedb's loop thread), and the vector and
    # keyword sides of a hybrid query, or many batch queries, run concurrently in Rust.

    def run_queries(
        self, queries: Sequence[VectorQuery | KeywordQuery], concurrency: int = 4
    ) -> list[list[StoredRow]]:
        """Run several searches at once; one result list per query, best first.

        Vector queries rank by cosine similarity (1 - cosine distance); with the ANN index,
        rows added since it was built are still searched exactly (LanceDB scans unindexed
        fragments) and candidates are re-ranked with the full vectors. Keyword queries rank
        by BM25 and match the text as words, never parsed as a query language, so quotes
        and operators in user text cannot fail. Filters are prefilters, so `limit`
        matching rows come back.
        """
        import asyncio

        for q in queries:
            if (
                isinstance(q, VectorQuery)
                and self.has_vector_column()
                and len(q.vector) != self.dim
            ):
                raise InvalidInput(
                    f"The query vector has {len(q.vector)} dimensions; collection "
                    f"{self.name!r} holds {self.dim}-dimension vectors.",
                    hint="Search with the model the collection was ingested with.",
                )
        loop, table = self._reader()
        refine = self._refine_factor()
        has_vectors = self.has_vector_column()

        async def one(q: VectorQuery | KeywordQuery, gate: asyncio.Semaphore) -> list[StoredRow]:
            if isinstance(q, VectorQuery) and not has_vectors:
                return []
            async with gate:
                builder = _async_query(table, q, refine)
                result = await builder.to_arrow()
            score = "_distance" if isinstance(q, VectorQuery) else "_score"
            return [
                StoredRow(
                    _row_chunk(r),
                    r["chunk_id"],
                    1.0 - float(r[score]) if score == "_distance" else float(r[score]),
                )
                for r in result.to_pylist()
            ]

        async def run_all() -> list[list[StoredRow]]:
            gate = asyncio.Semaphore(max(1, concurrency))
            return list(await asyncio.gather(*(one(q, gate) for q in queries)))

        return loop.run_until_complete(run_all())

    def vector_search(
        self, vector: Sequence[float], limit: int, where: str | None = None
    ) -> list[StoredRow]:
        """Nearest chunks by cosine similarity, best first (see `run_queries`)."""
        return self.run_queries([VectorQuery(vector, limit, where)])[0]

    def keyword_search(self, text: str, limit: int, where: str | None = None) -> list[StoredRow]:
        """BM25 full-text matches on `text`, best first (see `run_queries`)."""
        return self.run_queries([KeywordQuery(text, limit, where)])[0]

    def _reader(self) -> tuple[Any, Any]:
        """This collection's event loop and async table, opened on first use and moved to
        the latest version after this object wrote to the table."""
        import asyncio

        lancedb = import_lancedb()

        if self._loop is None:
            self._loop = asyncio.new_event_loop()

            async def open_table() -> Any:
                db = await lancedb.connect_async(self.store.uri)
                return await db.open_table(self.name)

            self._async_table = self._loop.run_until_complete(open_table())
            self._reader_stale = False
        if self._reader_stale:
            self._loop.run_until_complete(self._async_table.checkout_latest())
            self._reader_stale = False
        return self._loop, self._async_table

    def close(self) -> None:
        """Close the search event loop (searching again reopens it)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None
            self._async_table = None


@dataclass(frozen=True)
class VectorQuery:
    vector: Sequence[float]
    limit: int
    where: str | None = None


@dataclass(frozen=True)
class KeywordQuery:
    text: str
    limit: int
    where: str | None = None


def _async_query(table: Any, q: VectorQuery | KeywordQuery, refine: int | None) -> Any:
    """The LanceDB async query builder for one search (prefilter is the async default)."""
    if isinstance(q, VectorQuery):
        builder = (
            table.query()
            .nearest_to([float(x) for x in q.vector])
            .column("vector")
            .distance_type("cosine")
        )
        if refine is not None:
            builder = builder.nprobes(NPROBES).refine_factor(refine)
        columns = [*RESULT_COLUMNS, "_distance"]
    else:
        from lancedb.query import MatchQuery

        # MatchQuery declares its defaulted options in a way mypy reads as required.
        match = MatchQuery(q.text, "text")  # type: ignore[call-arg]
        builder = table.query().nearest_to_text(match)
        columns = [*RESULT_COLUMNS, "_score"]
    if q.where:
        builder = builder.where(q.where)
    return builder.select(columns).limit(q.limit)


def _vector_array(np: Any, pa: Any, vectors: Sequence[Any], dim: int) -> pa.Array:
    """A fixed_size_list<float32>[dim] array with nulls where a vector is missing."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        if vectors.shape[1] != dim:
            raise InvalidInput(
                f"Vectors of {vectors.shape[1]} dimensions where {dim} are expected."
            )
        flat = np.ascontiguousarray(vectors, dtype=np.float32)
        if not np.isfinite(flat).all():
            raise InvalidInput("An embedding contains NaN or infinite values.")
        return pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), dim)
    valid = [v is not None for v in vectors]
    flat = np.zeros((len(vectors), dim), dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None:
            if len(v) != dim:
                raise InvalidInput(f"A vector of {len(v)} dimensions where {dim} are expected.")
            flat[i] = v
    if not np.isfinite(flat).all():
        raise InvalidInput("An embedding contains NaN or infinite values.")
    mask = None if all(valid) else pa.array([not x for x in valid])
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), dim, mask=mask)


def _row_chunk(row: dict[str, Any]) -> Chunk:
    return Chunk(
        document_id=row["document_id"],
        path=row["path"],
        type=row["type"],
        ordinal=row["ordinal"],
        text=row["text"],
        page=row["page"],
        heading=row["heading"],
        line_start=row["line_start"],
        line_end=row["line_end"],
    )


def _scan_all_arrow(query: Any) -> pa.Table:
    """All matching rows (a plain query is limited to 10 unless told otherwise)."""
    return query.limit(None).to_arrow()


def _scan_all(query: Any) -> list[dict[str, Any]]:
    return list(_scan_all_arrow(query).to_pylist())


def _stat(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _dir_bytes(uri: str, name: str) -> int | None:
    """Bytes on disk of a local table (all versions), None for object stores."""
    if "://" in uri:
        return None
    root = Path(uri) / f"{name}.lance"
    if not root.exists():
        return None
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
