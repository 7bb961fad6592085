"""The knowledge-base store: one LanceDB table per collection (the only lancedb importer).

Everything LanceDB-specific lives in this package (schema, commits, indexes, query builders,
filter syntax), so that retrieval, ingest and the CLI talk to a small `Collection` API and
swapping the database touches one package. lancedb and pyarrow are imported inside
functions: importing lancedb costs about a second even without its REST namespace client
(`lancedb_import`), which `localgpt --help` and `localgpt chat` without retrieval must not
pay.

The modules: `collection` (the database, opening and creating collections, the embedding-
model binding check), `table` (a collection's table and its cached state), `rows` (row
shapes and every filter string), `writes`, `reads`, `indexes` (build, health, repair),
`search` (vector, keyword, hybrid's two sides) and `lancedb_import`.
"""

from localgpt_cli.rag.store.collection import Collection, Store, open_store
from localgpt_cli.rag.store.rows import DocumentSummary, chunk_filter, embed_hash, text_hash
from localgpt_cli.rag.store.search import ChunkCache, KeywordQuery, StoredRow, VectorQuery

__all__ = [
    "ChunkCache",
    "Collection",
    "DocumentSummary",
    "KeywordQuery",
    "Store",
    "StoredRow",
    "VectorQuery",
    "chunk_filter",
    "embed_hash",
    "open_store",
    "text_hash",
]
