"""Searching a collection: vector (cosine), keyword (BM25) and both at once, for hybrid.

The store runs the queries; which to run, and how their rankings are fused, is
`rag/retrieve.py`'s business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.store import remote
from localgpt_cli.rag.store.indexes import (
    NPROBES,
    REFINE_FACTOR,
    REFINE_FACTOR_PQ,
    VECTOR_INDEX_TYPE,
)
from localgpt_cli.rag.store.lancedb_import import import_lancedb
from localgpt_cli.rag.store.rows import RESULT_COLUMNS, optional_columns, row_chunk
from localgpt_cli.rag.store.table import VECTOR_INDEX, CollectionTable
from localgpt_cli.rag.types import Chunk


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


@dataclass
class StoredRow:
    """A search candidate as the store returns it: chunk fields plus the side's raw score."""

    chunk: Chunk
    chunk_id: str
    score: float  # cosine similarity (vector side) or BM25 score (keyword side)


class Search(CollectionTable):
    """The search operations of `Collection`."""

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
        # The document title too, where the table has one (the reranker weighs it), and
        # the OCR confidence (a table from before OCR has none).
        extra = optional_columns(self.schema.names)

        async def one(q: VectorQuery | KeywordQuery, gate: asyncio.Semaphore) -> list[StoredRow]:
            if isinstance(q, VectorQuery) and not has_vectors:
                return []
            async with gate:
                builder = _async_query(table, q, refine, extra)
                result = await builder.to_arrow()
            score = "_distance" if isinstance(q, VectorQuery) else "_score"
            return [
                StoredRow(
                    row_chunk(r),
                    r["chunk_id"],
                    1.0 - float(r[score]) if score == "_distance" else float(r[score]),
                )
                for r in result.to_pylist()
            ]

        async def run_all() -> list[list[StoredRow]]:
            gate = asyncio.Semaphore(max(1, concurrency))
            return list(await asyncio.gather(*(one(q, gate) for q in queries)))

        return loop.run_until_complete(run_all())

    def _reader(self) -> tuple[Any, Any]:
        """This collection's event loop and async table, opened on first use and moved to
        the latest version after this object wrote to the table."""
        import asyncio

        lancedb = import_lancedb()

        if self._loop is None:
            self._loop = asyncio.new_event_loop()

            async def open_table() -> Any:
                db = await lancedb.connect_async(
                    self.uri, storage_options=remote.storage_options(self.uri)
                )
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

    def _refine_factor(self) -> int | None:
        """The re-ranking factor for the ANN index (None: no index, exact scan)."""
        if not self.has_vector_index():
            return None
        if self._index_type is None:
            stats = self.table.index_stats(VECTOR_INDEX)
            self._index_type = str(stats.index_type) if stats is not None else ""
        return REFINE_FACTOR if self._index_type == VECTOR_INDEX_TYPE else REFINE_FACTOR_PQ


def _async_query(
    table: Any, q: VectorQuery | KeywordQuery, refine: int | None, extra: tuple[str, ...] = ()
) -> Any:
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
        columns = [*RESULT_COLUMNS, *extra, "_distance"]
    else:
        from lancedb.query import MatchQuery

        # MatchQuery declares its defaulted options in a way mypy reads as required.
        match = MatchQuery(q.text, "text")  # type: ignore[call-arg]
        builder = table.query().nearest_to_text(match)
        columns = [*RESULT_COLUMNS, *extra, "_score"]
    if q.where:
        builder = builder.where(q.where)
    return builder.select(columns).limit(q.limit)
