"""One collection's LanceDB table and what is cached about it: schema, indexes, metadata.

`CollectionTable` is the base the parts of `Collection` share (writes, reads, indexes,
search, each in its own module): the table handle, the cached schema and index list, the
metadata localgpt keeps on the `chunk_id` field (embedding model, dimension, the pending
mark) and the counts every part asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.store.rows import HAS_VECTOR, NO_VECTOR

if TYPE_CHECKING:
    import pyarrow as pa

META_MODEL = "localgpt:embed_model"
META_DIM = "localgpt:embed_dim"
META_INDEX_ROWS = "localgpt:vector_index_rows"  # rows the ANN index was trained on
META_FALLBACK = "localgpt:local_fallback"  # "1": bound to local: because Ollama was down
META_PENDING = "localgpt:pending"  # "1" while rows without a vector may exist
FTS_INDEX = "text_idx"
VECTOR_INDEX = "vector_idx"


class CollectionTable:
    """A collection's table with its cached state; `Collection` adds the operations."""

    def __init__(self, uri: str, name: str, table: Any):
        self.uri = uri  # the database's: searches open their own async connection to it
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

    def _changed(self) -> None:
        self._schema = None
        self._index_names = None
        self._index_type = None
        self._reader_stale = True

    def has_vector_index(self) -> bool:
        return VECTOR_INDEX in self.index_names()

    def has_fts_index(self) -> bool:
        return FTS_INDEX in self.index_names()

    # -- metadata -------------------------------------------------------------------

    def _metadata(self) -> dict[str, str]:
        raw = self.schema.field("chunk_id").metadata or {}
        return {k.decode(): v.decode() for k, v in raw.items()}

    @property
    def model(self) -> str | None:
        """The embedding model the stored vectors came from (None before the first ingest)."""
        return self._metadata().get(META_MODEL)

    @property
    def made_by_fallback(self) -> bool:
        """Whether an ingest bound this collection to the in-process embedder because no
        Ollama was reachable when it was created (rather than by the user's choice)."""
        return self._metadata().get(META_FALLBACK) == "1"

    @property
    def dim(self) -> int | None:
        """The vector dimension, from the vector column (None until vectors were stored)."""
        schema = self.schema
        if "vector" in schema.names:
            return int(schema.field("vector").type.list_size)
        recorded = self._metadata().get(META_DIM)
        return int(recorded) if recorded else None

    @property
    def version(self) -> int:
        return int(self.table.version)

    def pending_marked(self) -> bool | None:
        """Whether rows without a vector may exist, as ingest last recorded it (None: never
        recorded). Counting null vectors reads the whole vector column (~0.8 s at 60k rows),
        which an unchanged cron re-run must not pay."""
        value = self._metadata().get(META_PENDING)
        return None if value is None else value == "1"

    def mark_pending(self, pending: bool) -> None:
        """Record whether rows without a vector may exist; set before writing such rows, so
        a crash can only leave the mark on when nothing is pending (costing one count)."""
        value = "1" if pending else "0"
        if self._metadata().get(META_PENDING) != value:
            self.table.update_field_metadata(
                {"path": "chunk_id", "metadata": {META_PENDING: value}}
            )
            self._changed()

    def _mark_if_missing(self, vectors: Sequence[Any] | None) -> None:
        """Mark the collection pending before rows without a vector are written, so a
        crash between the two cannot leave such rows behind a "nothing pending" mark."""
        if vectors is None or any(v is None for v in vectors):
            self.mark_pending(True)

    # -- counts ---------------------------------------------------------------------

    def count(self, where: str | None = None) -> int:
        return int(self.table.count_rows(where))

    def has_vector_column(self) -> bool:
        return "vector" in self.schema.names

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
        return self.count(HAS_VECTOR)

    def count_without_vectors(self) -> int:
        """Rows stored without their vector (every row before the vector column exists).
        Reads the whole vector column: ask only when rows may be pending."""
        return self.count(NO_VECTOR) if self.has_vector_column() else self.count()


def scan_all_arrow(query: Any) -> pa.Table:
    """All matching rows (a plain query is limited to 10 unless told otherwise)."""
    return query.limit(None).to_arrow()


def scan_all(query: Any) -> list[dict[str, Any]]:
    return list(scan_all_arrow(query).to_pylist())
