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
from localgpt_cli.rag.store.rows import (
    CHUNK_FIELDS,
    RESULT_COLUMNS,
    optional_columns,
    rounded_confidence,
)
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


# The chunks a run of many searches has read (store row id -> chunk id and chunk).
ChunkCache = dict[int, tuple[str, Chunk]]


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
        self,
        queries: Sequence[VectorQuery | KeywordQuery],
        concurrency: int = 4,
        chunks: ChunkCache | None = None,
    ) -> list[list[StoredRow]]:
        """Run several searches at once; one result list per query, best first.

        Vector queries rank by cosine similarity (1 - cosine distance); with the ANN index,
        rows added since it was built are still searched exactly (LanceDB scans unindexed
        fragments) and candidates are re-ranked with the full vectors. Keyword queries rank
        by BM25 and match the text as words, never parsed as a query language, so quotes
        and operators in user text cannot fail. Filters are prefilters, so `limit`
        matching rows come back.

        `chunks` (row id -> chunk id and chunk) is a cache the caller keeps for one
        table version: the searches then return only row ids and scores (any column
        costs LanceDB a read per row: a third of a full-text query's CPU), and the rows
        not in it yet are read in one take. A batch's queries return the same passages
        over and over (on Cranfield at k=100 each ~20 times): each is read once.
        """
        import asyncio

        self._check_dimensions(queries)
        loop, table = self._reader()
        refine = self._refine_factor()
        has_vectors = self.has_vector_column()
        # The document title too, where the table has one (the reranker weighs it), and
        # the OCR confidence (a table from before OCR has none).
        extra = optional_columns(self.schema.names)
        columns = () if chunks is not None else (*RESULT_COLUMNS, *extra)
        # Vector queries of one limit and filter go as one multi-vector search: LanceDB
        # shares one scan of the vectors among them and tags each row with its query's
        # position (`query_index`), the same rows in the same order as one at a time.
        groups: dict[tuple[int, str | None], list[int]] = {}
        for i, q in enumerate(queries):
            if isinstance(q, VectorQuery) and has_vectors:
                groups.setdefault((q.limit, q.where), []).append(i)
        results: list[tuple[list[int], Any, str]] = []  # (query positions, arrow, score)

        async def search(members: list[int], gate: asyncio.Semaphore) -> None:
            builder = _async_query(table, [queries[i] for i in members], refine, columns)
            if chunks is not None:
                builder = builder.with_row_id()
            async with gate:
                result = await builder.to_arrow()
            vector = isinstance(queries[members[0]], VectorQuery)
            results.append((members, result, "_distance" if vector else "_score"))

        async def run_all() -> None:
            gate = asyncio.Semaphore(max(1, concurrency))
            jobs = [search(members, gate) for members in groups.values()]
            jobs += [search([i], gate) for i, q in enumerate(queries)
                     if isinstance(q, KeywordQuery)]  # fmt: skip
            await asyncio.gather(*jobs)
            if chunks is not None:
                await _take_missing(table, results, chunks, (*RESULT_COLUMNS, *extra))

        loop.run_until_complete(run_all())
        return _per_query(len(queries), results, chunks)

    def _check_dimensions(self, queries: Sequence[VectorQuery | KeywordQuery]) -> None:
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
    table: Any,
    batch: Sequence[VectorQuery | KeywordQuery],
    refine: int | None,
    columns: tuple[str, ...],
) -> Any:
    """The LanceDB async query builder for one search, or for several vector searches of
    one limit and filter (prefilter is the async default), returning `columns` and the
    score."""
    q = batch[0]
    if isinstance(q, VectorQuery):
        wanted = [[float(x) for x in v.vector] for v in batch]  # type: ignore[union-attr]
        builder = (
            table.query()
            .nearest_to(wanted if len(wanted) > 1 else wanted[0])
            .column("vector")
            .distance_type("cosine")
        )
        if refine is not None:
            builder = builder.nprobes(NPROBES).refine_factor(refine)
        selected = [*columns, "_distance"]
    else:
        from lancedb.query import MatchQuery

        # MatchQuery declares its defaulted options in a way mypy reads as required.
        match = MatchQuery(q.text, "text")  # type: ignore[call-arg]
        builder = table.query().nearest_to_text(match)
        selected = [*columns, "_score"]
    if q.where:
        builder = builder.where(q.where)
    return builder.select(selected).limit(q.limit)


async def _take_missing(
    table: Any,
    results: list[tuple[list[int], Any, str]],
    chunks: ChunkCache,
    columns: tuple[str, ...],
) -> None:
    """Read the rows the searches returned that `chunks` does not hold yet, in one take."""
    missing = sorted({rid for _, result, _ in results for rid in
                      result.column("_rowid").to_pylist()} - chunks.keys())  # fmt: skip
    if not missing:
        return
    taken = await table.take_row_ids(missing).select(list(columns)).with_row_id().to_arrow()
    found = zip(taken.column("chunk_id").to_pylist(), _chunks(taken), strict=True)
    chunks.update(zip(taken.column("_rowid").to_pylist(), found, strict=True))


def _chunks(result: Any) -> list[Chunk]:
    """The chunks of rows that have the result columns (and the optional ones, `title`
    and `ocr_confidence`, where the table has them)."""
    fields = [result.column(name).to_pylist() for name in CHUNK_FIELDS]
    names, none = result.column_names, [None] * result.num_rows
    fields.append(result.column("title").to_pylist() if "title" in names else none)
    confidence = result.column("ocr_confidence").to_pylist() if "ocr_confidence" in names else none
    fields.append([rounded_confidence(c) for c in confidence])
    return [Chunk(*values) for values in zip(*fields, strict=True)]


def _per_query(
    count: int, results: list[tuple[list[int], Any, str]], chunks: ChunkCache | None
) -> list[list[StoredRow]]:
    """The searches' rows as one list per query, by the positions each search answers."""
    out: list[list[StoredRow]] = [[] for _ in range(count)]
    for members, result, score in results:
        rows = stored_rows(result, score, chunks)
        if len(members) == 1:
            out[members[0]] = rows
            continue
        for index, query_rows in split_by_query(result, rows).items():
            out[members[index]] = query_rows
    return out


def stored_rows(result: Any, score: str, chunks: ChunkCache | None = None) -> list[StoredRow]:
    """A search's Arrow rows as `StoredRow`s, in order, their chunk ids and chunks from
    `chunks` by row id when given. Read column by column: building a dict per row
    (`to_pylist`) was most of the cost of a batch of searches at k=100."""
    raw = result.column(score).to_pylist()
    scores = [1.0 - float(v) for v in raw] if score == "_distance" else [float(v) for v in raw]
    if chunks is not None:
        rows = map(chunks.__getitem__, result.column("_rowid").to_pylist())
        return [StoredRow(c, i, v) for (i, c), v in zip(rows, scores, strict=True)]
    ids = result.column("chunk_id").to_pylist()
    return [StoredRow(c, i, v) for c, i, v in zip(_chunks(result), ids, scores, strict=True)]


def split_by_query(result: Any, rows: list[StoredRow]) -> dict[int, list[StoredRow]]:
    """A multi-vector search's rows by the position of their query, each best first."""
    by_query: dict[int, list[StoredRow]] = {}
    for index, row in zip(result.column("query_index").to_pylist(), rows, strict=True):
        by_query.setdefault(index, []).append(row)
    return by_query
