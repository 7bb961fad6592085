"""Index building, health and repair: the full-text (BM25) index and the ANN vector index.

Which indexes a collection has, how far they cover its rows (`IndexHealth`, what `docs
stats` reports and ingest repairs), when the ANN index is due to be built or retrained,
and `optimize()`, which compacts the table and folds new rows into the indexes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from localgpt_cli.rag.store.table import (
    FTS_INDEX,
    META_INDEX_ROWS,
    VECTOR_INDEX,
    CollectionTable,
)

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


class Indexes(CollectionTable):
    """The index operations of `Collection`."""

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

    def ensure_fts_index(self) -> None:
        """The native full-text (BM25) index on `text`; rows added later are still
        searched (unindexed fragments are scanned) until `optimize()` folds them in."""
        if FTS_INDEX in self.index_names():
            return
        self.build_fts_index()

    def build_fts_index(self, **options: Any) -> None:
        """(Re)build the full-text index; `options` override FTS_OPTIONS (benchmarks)."""
        from lancedb.index import FTS

        config = FTS(**{**FTS_OPTIONS, **options})
        self.table.create_index("text", config=config, name=FTS_INDEX, replace=True)
        self._changed()

    def index_health(self) -> IndexHealth:
        """How far the indexes cover the rows (see IndexHealth); a few metadata reads."""
        fts = self._index_rows(FTS_INDEX)
        vector = self._index_rows(VECTOR_INDEX)
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
        stats = self.table.index_stats(VECTOR_INDEX)
        if stats is None:
            return False
        if str(stats.index_type) != VECTOR_INDEX_TYPE:
            return True
        trained = int(self._metadata().get(META_INDEX_ROWS) or 0)
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
            name=VECTOR_INDEX,
            replace=True,
        )
        self.table.update_field_metadata(
            {"path": "chunk_id", "metadata": {META_INDEX_ROWS: str(rows)}}
        )
        self._changed()

    def optimize(self, cleanup_older_than: timedelta = timedelta(hours=1)) -> None:
        """Compact small fragments, fold new rows into the indexes, drop old versions, then
        build or retrain the ANN index when it is due.

        Each `write_documents` commit adds a fragment; a run over thousands of files would
        otherwise leave thousands of them and slow every scan. The ANN index is built after
        the compaction, on the rows where they will stay: compaction rewrites the rows of an
        index built before it, and that remapped index searched in 10.8 ms against 7.7 ms at
        100k rows, and at 1M in 41 ms at recall 0.976 against 13 ms at 1.00. Versions older
        than an hour are removed: search processes are short-lived and ingest holds the
        lock, so no reader is still on them. What the compaction freed is given back to
        the system before the index build, whose peak comes on top of it (heap.py).
        """
        from localgpt_cli.heap import give_back

        self.ensure_fts_index()
        self.table.optimize(cleanup_older_than=cleanup_older_than)
        give_back()
        self.ensure_indexes()
        self._changed()
