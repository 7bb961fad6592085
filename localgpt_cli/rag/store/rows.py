"""Row shapes of a collection's table, and the one place that writes LanceDB filter syntax.

A chunk is stored as one row (`row_schema`); the helpers here turn chunks into columns and
rows back into chunks. Every filter string the store hands LanceDB is built by a function
below, with its values quoted, so a path or id holding `'` or `%` can never change what a
filter means, and swapping the database means rewriting this file, not hunting for SQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.titles import embed_body
from localgpt_cli.rag.types import Chunk

if TYPE_CHECKING:
    import pyarrow as pa

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

# The result columns that make a `Chunk`, in the order of its fields (`title` and
# `ocr_confidence` follow).
CHUNK_FIELDS = ("document_id", "path", "type", "ordinal", "text", "page", "heading",
                "line_start", "line_end")  # fmt: skip

# Columns later versions added, read where a table has them (older tables lack them): the
# document title (embedded with the text) and the mean confidence of a page read by OCR.
OPTIONAL_COLUMNS = ("title", "ocr_confidence")

# Text hashes per `IN (...)` filter of the embedding-cache lookup: keeps each SQL filter short.
FILTER_BATCH = 500

# Rows with and without their embedding (a null vector: stored while Ollama was down).
HAS_VECTOR = "vector IS NOT NULL"
NO_VECTOR = "vector IS NULL"


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
        pa.field("ocr_confidence", pa.float32()),
    ]
    if dim is not None:
        fields.append(vector_field(dim))
    return pa.schema(fields)


def vector_field(dim: int) -> pa.Field:
    import pyarrow as pa

    return pa.field("vector", pa.list_(pa.float32(), dim), nullable=True)


def chunk_columns(
    chunks: Sequence[Chunk], hashes: Sequence[str] | None = None
) -> dict[str, list[Any]]:
    """The non-vector columns of `chunks`' rows, by column name; `hashes` are the chunks'
    `embed_hash`es when the caller has them already."""
    return {
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
        "text_hash": list(hashes) if hashes is not None else [embed_hash(c) for c in chunks],
        "title": [c.title for c in chunks],
        "ocr_confidence": [c.ocr_confidence for c in chunks],
    }


def vector_array(np: Any, pa: Any, vectors: Sequence[Any], dim: int) -> pa.Array:
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


def row_chunk(row: dict[str, Any]) -> Chunk:
    """The chunk a stored row (of RESULT_COLUMNS) holds."""
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
        title=row.get("title"),
        ocr_confidence=rounded_confidence(row.get("ocr_confidence")),
    )


def rounded_confidence(confidence: float | None) -> float | None:
    """A stored float32 confidence as it was given (91.30000305 -> 91.3)."""
    return None if confidence is None else round(confidence, 1)


def optional_columns(names: Sequence[str]) -> tuple[str, ...]:
    """Those of OPTIONAL_COLUMNS a table with these column names has."""
    return tuple(c for c in OPTIONAL_COLUMNS if c in names)


# -- filters: LanceDB's SQL dialect ------------------------------------------------------


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters: quotes doubled, so a path with `'` is safe."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')` with every value escaped."""
    return f"{column} IN ({', '.join(sql_string(v) for v in values)})"


def where_document(document_id: str) -> str:
    """The rows of one document."""
    return f"document_id = {sql_string(document_id)}"


def where_documents(document_ids: Iterable[str]) -> str:
    """The rows of any of these documents."""
    return sql_in("document_id", document_ids)


def where_embedded(text_hashes: Iterable[str]) -> str:
    """Rows with a vector whose `text_hash` is one of these: the embedding-cache lookup."""
    return f"{HAS_VECTOR} AND {sql_in('text_hash', text_hashes)}"


def chunk_filter(
    *, type: str | None = None, path_glob: str | None = None, document_id: str | None = None
) -> tuple[str | None, bool]:
    """The search prefilter for these options (None: no filter), and whether it is exact:
    False when the path glob has a character class, which SQL LIKE can only widen, so the
    caller must check each row's path with fnmatch."""
    clauses = []
    exact = True
    if type:
        clauses.append(f"type = {sql_string(type)}")
    if document_id:
        clauses.append(where_document(document_id))
    if path_glob:
        like, exact = glob_to_like(path_glob)
        clauses.append(f"path LIKE {sql_string(like)}")
    return (" AND ".join(clauses) or None), exact


def glob_to_like(glob: str) -> tuple[str, bool]:
    """An fnmatch glob as a SQL LIKE pattern (backslash escapes), and whether it is exact.

    `*` -> `%` and `?` -> `_` are exact; a character class `[...]` becomes `_` (one
    character), which matches a superset, so the caller must post-filter with fnmatch.
    """
    out: list[str] = []
    exact = True
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        elif ch == "[":
            end = _class_end(glob, i)
            if end is None:
                out.append("[")  # fnmatch treats an unclosed `[` as a literal
            else:
                out.append("_")
                exact = False
                i = end
        elif ch in "%_\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out), exact


def _class_end(glob: str, start: int) -> int | None:
    """Index of the `]` closing the class that opens at `start`, as fnmatch parses it."""
    j = start + 1
    if j < len(glob) and glob[j] == "!":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    return end if end != -1 else None
