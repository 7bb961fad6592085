"""Writing a collection: documents' rows in one commit, moves, deletes, late vectors.

Durability rules the ingest pipeline relies on:
- a group of documents' rows is replaced by one `merge_insert` (one commit, one new table
  version), so a crash leaves each document either old or new;
- vectors may be missing (Ollama down): such rows are stored with a null vector, found by
  keyword search, and filled in later by `set_vectors` (again one commit per batch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.store.rows import (
    chunk_columns,
    row_schema,
    vector_array,
    vector_field,
    where_document,
    where_documents,
)
from localgpt_cli.rag.store.table import CollectionTable
from localgpt_cli.rag.types import Chunk

if TYPE_CHECKING:
    import pyarrow as pa


class Writes(CollectionTable):
    """The write operations of `Collection`."""

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

    def _ensure_title_column(self, columns: dict[str, list[Any]]) -> None:
        """Tables made before titles lack the column: add it (all null, a schema-only
        commit). Their rows keep their vectors, keyed by the bare text; the next ingest
        re-embeds each chunk once, with its title (the manifest's options mark changed).
        Tables made before OCR get its column with their first OCR'd chunk (until then
        their rows are written without it)."""
        import pyarrow as pa

        if "title" not in self.schema.names:
            self.table.add_columns(pa.field("title", pa.string()))
            self._changed()
        if any(c is not None for c in columns.get("ocr_confidence", ())):
            self._ensure_ocr_column()

    def _ensure_ocr_column(self) -> None:
        """The OCR confidence column on a table made before OCR (a schema-only commit)."""
        import pyarrow as pa

        if "ocr_confidence" not in self.schema.names:
            self.table.add_columns(pa.field("ocr_confidence", pa.float32()))
            self._changed()

    def _rows_table(self, columns: dict[str, list[Any]], vectors: Sequence[Any] | None) -> pa.Table:
        import numpy as np
        import pyarrow as pa

        rows = len(columns["chunk_id"])
        if vectors is not None and len(vectors) != rows:
            raise ValueError("one vector (or None) per chunk")
        dims = {len(v) for v in (vectors if vectors is not None else ()) if v is not None}
        if len(dims) > 1:
            raise InvalidInput(f"Vectors of different dimensions {sorted(dims)} in one batch.")
        if dims:
            self._ensure_vector_column(dims.pop())
        self._ensure_title_column(columns)
        schema = row_schema(self.dim if "vector" in self.schema.names else None)
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema if f.name != "vector"]
        if "vector" in schema.names:
            if vectors is None:
                vectors = [None] * rows
            arrays.append(vector_array(np, pa, vectors, self.dim or 0))
        # In the table's column order (a table from before `title` has it last), and only
        # the columns it has (one from before OCR has no `ocr_confidence`).
        return pa.Table.from_arrays(arrays, schema=schema).select(self.schema.names)

    def write_documents(
        self,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: Sequence[Any] | None,
        *,
        append: bool,
    ) -> None:
        """Make `chunks` the rows of all of `document_ids`, in one commit (`write_rows`)."""
        self.write_rows(document_ids, chunk_columns(chunks), vectors, append=append)

    def write_rows(
        self,
        document_ids: Sequence[str],
        columns: dict[str, list[Any]],
        vectors: Sequence[Any] | None,
        *,
        append: bool,
    ) -> None:
        """Make the rows in `columns` (`rows.chunk_columns`: one list per column) the rows
        of all of `document_ids`, in one commit. Ingest hands its chunks over as columns,
        as its worker processes made them: no `Chunk` object per row on the way.

        `vectors[i]` is the embedding of row i, or None when it is not known yet
        (Ollama down): the row is stored without one and `pending()` lists it. Rows of the
        documents that are not in `columns` any more (a document got shorter) are deleted
        by the same commit.

        Ingest groups small documents into one commit because each commit costs tens of
        milliseconds (a per-file commit dominated a run over many small files); the group
        is still atomic, so a crash leaves each document old or new. With `append` the
        caller knows none of the documents is stored, so a plain append replaces the
        merge's join over the whole table. A document with no rows is deleted.
        """
        ids = sorted(set(document_ids))
        if not columns or not columns["chunk_id"]:
            self.delete_documents(ids)
            return
        self._mark_if_missing(vectors)
        data = self._rows_table(columns, vectors)
        if append:
            self.table.add(data, on_bad_vectors="null")
        else:
            (
                self.table.merge_insert("chunk_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(where_documents(ids))
                .execute(data, on_bad_vectors="null")
            )
        self._reader_stale = True

    def move_document(self, document_id: str, path: str) -> None:
        """Give a document's rows a new path (a file moved: same text, same vectors)."""
        self.table.update(where=where_document(document_id), values={"path": path})
        self._reader_stale = True

    def delete_documents(self, document_ids: Iterable[str]) -> int:
        """Delete every row of these documents in one commit; returns rows deleted."""
        ids = sorted(set(document_ids))
        if not ids:
            return 0
        where = where_documents(ids)
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
            [pa.array(list(chunk_ids), pa.string()), vector_array(np, pa, vectors, dim)],
            schema=pa.schema(
                [pa.field("chunk_id", pa.string(), nullable=False), vector_field(dim)]
            ),
        )
        result = self.table.merge_insert("chunk_id").when_matched_update_all().execute(data)
        self._reader_stale = True
        return int(result.num_updated_rows)
