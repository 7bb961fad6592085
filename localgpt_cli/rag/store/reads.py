"""Reading a collection: its documents, their chunks, the pending backlog, the vector cache.

These are the scans ingest and `docs` make. Filters on the vector column read the whole
column, so each read that needs one skips it when the collection's pending mark says no
row is missing its vector.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.store.rows import (
    FILTER_BATCH,
    HAS_VECTOR,
    NO_VECTOR,
    RESULT_COLUMNS,
    DocumentSummary,
    PendingChunk,
    optional_columns,
    row_chunk,
    where_document,
    where_documents,
    where_embedded,
)
from localgpt_cli.rag.store.table import CollectionTable, scan_all, scan_all_arrow
from localgpt_cli.rag.types import Chunk

if TYPE_CHECKING:
    from localgpt_cli.rag.hashkeys import KnownHashes


class Reads(CollectionTable):
    """The read operations of `Collection` (searches are in `search.py`)."""

    def document_ids(self) -> set[str]:
        """Ids of the stored documents (one scan of one column)."""
        table = scan_all_arrow(self.table.search().select(["document_id"]))
        return set(table.column("document_id").unique().to_pylist())

    def document_hashes(self, document_ids: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
        """Path and chunk `text_hash`es in order, per document: what ingest compares a file's
        fresh chunks with when the manifest entry that vouched for them was lost."""
        wanted = sorted(set(document_ids))
        rows: list[dict[str, Any]] = []
        for start in range(0, len(wanted), FILTER_BATCH):
            query = (
                self.table.search()
                .where(where_documents(wanted[start : start + FILTER_BATCH]))
                .select(["document_id", "path", "ordinal", "text_hash"])
            )
            rows += scan_all(query)
        out: dict[str, tuple[str, list[str]]] = {}
        for r in sorted(rows, key=lambda r: (r["document_id"], r["ordinal"])):
            out.setdefault(r["document_id"], (r["path"], []))[1].append(r["text_hash"])
        return out

    def embedded_hashes(self) -> KnownHashes:
        """Text hashes of the chunks stored with a vector: what the embedding cache holds
        (as 64-bit keys, taken a slice at a time: never a string per row at once)."""
        from localgpt_cli.rag.hashkeys import MERGE, KnownHashes

        known = KnownHashes()
        if not self.has_vector_column():
            return known
        query = self.table.search().select(["text_hash"])
        if self.pending_marked() is not False:  # the filter reads the whole vector column
            query = query.where(HAS_VECTOR)
        column = scan_all_arrow(query).column("text_hash")
        for start in range(0, len(column), MERGE):
            known.update(column.slice(start, MERGE).to_pylist())
        return known

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
        query = self.table.search().where(HAS_VECTOR).select(["chunk_id"]).limit(1)
        return query.to_arrow().num_rows > 0

    def pending(self, limit: int | None = None) -> list[PendingChunk]:
        """Chunks stored without a vector, oldest document order first."""
        where = NO_VECTOR if self.has_vector_column() else None
        columns = ["chunk_id", "text", "text_hash"]
        if "title" in self.schema.names:
            columns.append("title")
        query = self.table.search().select(columns)
        if where:
            query = query.where(where)
        rows = query.limit(limit).to_arrow().to_pylist() if limit else scan_all(query)
        return [
            PendingChunk(r["chunk_id"], r["text"], r["text_hash"], r.get("title")) for r in rows
        ]

    def lookup_vectors(self, text_hashes: Iterable[str]) -> dict[str, list[float]]:
        """The embedding cache: stored vectors keyed by `embed_hash` (of what was embedded)."""
        if not self.has_vector_column():
            return {}
        wanted = sorted(set(text_hashes))
        found: dict[str, list[float]] = {}
        for start in range(0, len(wanted), FILTER_BATCH):
            batch = wanted[start : start + FILTER_BATCH]
            query = (
                self.table.search()
                .where(where_embedded(batch))
                .select(["text_hash", "vector"])
            )
            for row in scan_all(query):
                found.setdefault(row["text_hash"], row["vector"])
        return found

    def documents(self) -> list[DocumentSummary]:
        """One summary per document, by path."""
        table = scan_all_arrow(self.table.search().select(["document_id", "path", "type"]))
        if table.num_rows == 0:
            return []
        grouped = table.group_by(["document_id", "path", "type"]).aggregate(
            [("document_id", "count")]
        )
        pending: dict[str, int] = {}
        if not self.has_vector_column():
            pending = {r["document_id"]: r["document_id_count"] for r in grouped.to_pylist()}
        elif self.pending_marked() is not False:  # the null filter reads every vector
            nulls = scan_all_arrow(self.table.search().where(NO_VECTOR).select(["document_id"]))
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
            .where(where_document(document_id))
            .select([*RESULT_COLUMNS, *optional_columns(self.schema.names)])
        )
        rows = sorted(scan_all(query), key=lambda r: r["ordinal"])
        return [row_chunk(r) for r in rows]
