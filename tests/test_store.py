"""The LanceDB store on real tables in tmp_path: schema, one-commit replaces, pending
embeddings, the model guard, full-text search and the vector index lifecycle."""

from __future__ import annotations

import numpy as np
import pytest

from localgpt_cli.errors import InvalidInput, NotFound, UsageError
from localgpt_cli.rag.store import (
    Collection,
    KeywordQuery,
    StoredRow,
    VectorQuery,
    embed_hash,
    open_store,
    text_hash,
)
from localgpt_cli.rag.types import Chunk

DIM = 16


def make_chunks(document_id: str, texts: list[str], path: str | None = None) -> list[Chunk]:
    return [
        Chunk(
            document_id,
            path or f"notes/{document_id}.md",
            "markdown",
            i,
            text,
            page=i + 1,
            heading="Intro",
            line_start=i * 10 + 1,
            line_end=i * 10 + 9,
        )
        for i, text in enumerate(texts)
    ]


def unit_vectors(n: int, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).tolist()


def put(coll: Collection, document_id: str, chunks: list[Chunk], vectors=None) -> None:
    """Make `chunks` the document's rows, as ingest does for a document already stored."""
    coll.write_documents([document_id], chunks, vectors, append=False)


def vector_search(coll: Collection, vector, limit: int) -> list[StoredRow]:
    return coll.run_queries([VectorQuery(vector, limit)])[0]


def keyword_search(coll: Collection, text: str, limit: int) -> list[StoredRow]:
    return coll.run_queries([KeywordQuery(text, limit)])[0]


@pytest.fixture
def coll(tmp_path) -> Collection:
    return open_store(tmp_path / "lancedb").collection("notes", create=True)


def test_schema_and_stored_row(coll):
    chunks = make_chunks("d1", ["alpha beta", "gamma delta"])
    put(coll, "d1", chunks, unit_vectors(2))
    schema = coll.table.schema
    assert schema.names == [
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
        "text_hash",
        "title",
        "ocr_confidence",
        "vector",
    ]
    assert str(schema.field("vector").type) == f"fixed_size_list<item: float>[{DIM}]"
    assert schema.field("vector").nullable
    row = next(r for r in coll.table.to_arrow().to_pylist() if r["chunk_id"] == "d1:1")
    assert row["document_id"] == "d1" and row["ordinal"] == 1 and row["page"] == 2
    assert row["text_hash"] == text_hash("gamma delta")
    assert coll.chunks("d1") == chunks
    assert coll.dim == DIM


def test_write_documents_is_one_commit_and_idempotent(coll):
    put(coll, "other", make_chunks("other", ["unrelated text"]), unit_vectors(1))
    v0 = coll.version
    put(coll, "d1", make_chunks("d1", ["one", "two", "three"]), unit_vectors(3))
    assert coll.version == v0 + 1
    v1 = coll.version
    # shorter document: the dropped chunk goes in the same commit
    put(coll, "d1", make_chunks("d1", ["one", "TWO"]), unit_vectors(2, seed=1))
    assert coll.version == v1 + 1
    assert [c.text for c in coll.chunks("d1")] == ["one", "TWO"]
    # replacing again with the same rows changes nothing visible
    put(coll, "d1", make_chunks("d1", ["one", "TWO"]), unit_vectors(2, seed=1))
    assert coll.count() == 3
    assert [c.text for c in coll.chunks("other")] == ["unrelated text"]


def test_delete_documents(coll):
    for doc in ("a", "b", "c"):
        put(coll, doc, make_chunks(doc, [f"{doc} text", f"{doc} more"]))
    v0 = coll.version
    assert coll.delete_documents(["a", "c", "missing"]) == 4
    assert coll.version == v0 + 1
    assert [d.document_id for d in coll.documents()] == ["b"]
    v1 = coll.version
    assert coll.delete_documents(["a"]) == 0
    assert coll.version == v1  # nothing matched: no empty commit


def test_pending_then_set_vectors(coll):
    chunks = make_chunks("d1", ["first text", "second text", "third text"])
    put(coll, "d1", chunks)  # Ollama down: no vectors at all
    assert coll.dim is None
    pending = coll.pending()
    assert [p.chunk_id for p in pending] == ["d1:0", "d1:1", "d1:2"]
    assert pending[0].text_hash == text_hash("first text")
    assert coll.documents()[0].pending == 3

    vectors = unit_vectors(2)
    v0 = coll.version
    assert coll.set_vectors(["d1:0", "d1:2"], vectors) == 2
    assert coll.dim == DIM
    assert [p.chunk_id for p in coll.pending()] == ["d1:1"]
    assert len(coll.pending(limit=1)) == 1
    v1 = coll.version
    coll.set_vectors(["d1:1"], unit_vectors(1, seed=3))
    assert coll.version == v1 + 1  # one commit per batch once the column exists
    assert v1 > v0
    assert coll.pending() == []
    assert coll.documents()[0].has_vectors


def test_mixed_null_vectors_in_one_replace(coll):
    vectors = unit_vectors(2)
    put(coll, "d1", make_chunks("d1", ["has vector", "no vector"]), [vectors[0], None])
    assert [p.text for p in coll.pending()] == ["no vector"]
    hits = vector_search(coll, vectors[0], 5)
    assert [h.chunk_id for h in hits] == ["d1:0"]  # null-vector rows are never vector hits
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_lookup_vectors_is_the_embedding_cache(coll):
    vectors = unit_vectors(2)
    put(coll, "d1", make_chunks("d1", ["kept paragraph", "old paragraph"]), vectors)
    put(coll, "d2", make_chunks("d2", ["pending paragraph"]))
    found = coll.lookup_vectors(
        [text_hash("kept paragraph"), text_hash("pending paragraph"), text_hash("never seen")]
    )
    assert list(found) == [text_hash("kept paragraph")]
    assert np.allclose(found[text_hash("kept paragraph")], vectors[0], atol=1e-6)


def test_titled_chunks_are_keyed_by_what_is_embedded(coll):
    chunks = make_chunks("d1", ["# Guide\nintro", "body text"])
    for c in chunks:
        c.title = "Guide"
    put(coll, "d1", chunks)  # stored pending: the title must be kept for later
    pending = coll.pending()
    assert [(p.title, p.text_hash) for p in pending] == [
        ("Guide", text_hash("# Guide\nintro")),  # opens with its title: the text alone
        ("Guide", text_hash("Guide\n\nbody text")),
    ]
    assert coll.chunks("d1")[1].text == "body text"  # the stored text is the bare slice


def test_table_from_before_titles_gains_the_column_and_keeps_its_rows(coll):
    coll.table.drop_columns(["title"])  # the schema of collections made before titles
    coll._changed()
    vectors = unit_vectors(2)
    put(coll, "d1", make_chunks("d1", ["old one"]), [vectors[0]])
    assert "title" in coll.table.schema.names
    coll.table.drop_columns(["title"])
    coll._changed()
    put(coll, "d2", make_chunks("d2", ["old two"]))
    assert [(p.text, p.title) for p in coll.pending()] == [("old two", None)]
    titled = make_chunks("d3", ["new text"])
    titled[0].title = "Doc"
    put(coll, "d3", titled, [vectors[1]])
    assert coll.table.schema.names[-1] == "title"  # added last; rows written by name
    assert set(coll.lookup_vectors([text_hash("old one"), text_hash("Doc\n\nnew text")])) == {
        text_hash("old one"), text_hash("Doc\n\nnew text")
    }
    assert coll.count() == 3


def test_table_from_before_ocr_is_read_and_gains_the_column_with_an_ocr_chunk(coll):
    coll.table.drop_columns(["ocr_confidence"])  # the schema of collections made before OCR
    coll._changed()
    put(coll, "d1", make_chunks("d1", ["typed notes about the boiler"]))
    assert "ocr_confidence" not in coll.table.schema.names  # plain rows: no schema change
    assert coll.chunks("d1")[0].ocr_confidence is None
    assert keyword_search(coll, "boiler", 5)[0].chunk.ocr_confidence is None
    scanned = make_chunks("d2", ["scanned invoice for the boiler"])
    scanned[0].ocr_confidence = 91.3
    put(coll, "d2", scanned)
    assert "ocr_confidence" in coll.table.schema.names
    assert coll.chunks("d2")[0].ocr_confidence == 91.3
    hits = keyword_search(coll, "boiler", 5)
    assert {r.chunk.document_id: r.chunk.ocr_confidence for r in hits} == {"d1": None, "d2": 91.3}


def test_model_recorded_and_mismatch_refused(coll, tmp_path):
    coll.set_model("nomic-embed-text", DIM)
    put(coll, "d1", make_chunks("d1", ["x"]), unit_vectors(1))
    reopened = open_store(tmp_path / "lancedb").collection("notes")
    assert (reopened.model, reopened.dim) == ("nomic-embed-text", DIM)
    reopened.check_model("nomic-embed-text", DIM)
    with pytest.raises(InvalidInput) as err:
        reopened.check_model("all-minilm", 384)
    msg = str(err.value)
    assert err.value.exit_code == 6
    assert "nomic-embed-text" in msg and "all-minilm" in msg
    assert "localgpt ingest --force -C notes" in msg
    with pytest.raises(InvalidInput):
        reopened.set_model("all-minilm")
    with pytest.raises(InvalidInput):  # a vector of another dimension cannot be stored
        put(reopened, "d2", make_chunks("d2", ["y"]), [[0.1] * (DIM + 1)])


def test_keyword_search_works_without_vectors(coll):
    put(coll, "d1", make_chunks("d1", ["the vpn setup guide", "printer drivers"]))
    hits = keyword_search(coll, "vpn", 5)
    assert [h.chunk_id for h in hits] == ["d1:0"]
    assert hits[0].score > 0
    assert vector_search(coll, [0.0] * DIM, 5) == []  # no vector column yet: nothing, no error


def test_keyword_query_with_operators_and_quotes_does_not_fail(coll):
    put(coll, "d1", make_chunks("d1", ["what's new in C++ (really) AND:more"]))
    assert [h.chunk_id for h in keyword_search(coll, "what's \"C++ (really AND:", 5)] == ["d1:0"]


def test_fts_index_stays_current_after_replace(coll):
    put(coll, "d1", make_chunks("d1", ["zebra crossing"]))
    coll.optimize()  # fold the rows into the FTS index
    fts = [i for i in coll.indexes() if i.type == "FTS"][0]
    assert fts.indexed_rows == 1 and fts.unindexed_rows == 0
    put(coll, "d1", make_chunks("d1", ["giraffe crossing"]))
    assert [h.chunk.text for h in keyword_search(coll, "giraffe", 5)] == ["giraffe crossing"]
    assert keyword_search(coll, "zebra", 5) == []
    coll.optimize()
    assert [h.chunk.text for h in keyword_search(coll, "giraffe", 5)] == ["giraffe crossing"]
    assert keyword_search(coll, "zebra", 5) == []


def test_optimize_compacts_fragments(coll):
    for i in range(12):
        put(coll, f"d{i}", make_chunks(f"d{i}", [f"text {i}"]), unit_vectors(1, i))
    assert coll.stats().fragments == 12
    coll.optimize()
    stats = coll.stats()
    assert stats.fragments == 1
    assert stats.rows == 12 and stats.documents == 12 and stats.pending == 0
    assert stats.bytes and stats.bytes > 0
    assert keyword_search(coll, "text", 20)
    assert len(vector_search(coll, unit_vectors(1)[0], 20)) == 12


@pytest.mark.parametrize("name", ["", "a b", "../x", "x" * 65, "naïve", "a.b"])
def test_collection_name_validated(tmp_path, name):
    with pytest.raises(UsageError):
        open_store(tmp_path).collection(name, create=True)


def test_missing_collection_and_listing(tmp_path):
    store = open_store(tmp_path / "db")
    with pytest.raises(NotFound):
        store.collection("nope")
    store.collection("b-2", create=True)
    coll = store.collection("a_1", create=True, dim=DIM)
    coll.set_model("m", DIM)
    put(coll, "d", make_chunks("d", ["x"]), unit_vectors(1))
    infos = store.collections()
    assert [(i.name, i.rows, i.model, i.dim) for i in infos] == [
        ("a_1", 1, "m", DIM),
        ("b-2", 0, None, None),
    ]
    store.drop_collection("b-2")
    assert [i.name for i in store.collections()] == ["a_1"]


def _clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((16, DIM))
    x = centres[rng.integers(0, 16, n)] + 0.3 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_vector_index_built_above_threshold_and_new_rows_found(coll):
    data = _clustered(600, seed=1)
    for d in range(6):
        chunks = make_chunks(f"d{d}", [f"chunk {d} {i}" for i in range(100)])
        put(coll, f"d{d}", chunks, data[d * 100 : (d + 1) * 100].tolist())
    assert coll.ensure_indexes(min_rows=1000) is False
    assert not coll.has_vector_index()
    assert coll.ensure_indexes(min_rows=500) is True
    assert coll.has_vector_index()
    assert coll.ensure_indexes(min_rows=500) is False  # already there

    # rows added after the index must still be found, before and after optimize()
    fresh = _clustered(5, seed=99)
    put(coll, "new", make_chunks("new", [f"fresh {i}" for i in range(5)]), fresh.tolist())
    for _ in range(2):
        for i, v in enumerate(fresh):
            top = vector_search(coll, v.tolist(), 3)
            assert top[0].chunk_id == f"new:{i}"
            assert top[0].score == pytest.approx(1.0, abs=1e-3)
        coll.optimize()
    vec_index = [i for i in coll.indexes() if i.name == "vector_idx"][0]
    assert vec_index.indexed_rows == 605 and vec_index.unindexed_rows == 0

    # growing 4x past the rows it was trained on (600) retrains it
    more = _clustered(1800, seed=5)
    put(coll, "m0", make_chunks("m0", ["more"] * 1700), more[:1700].tolist())
    assert coll.ensure_indexes(min_rows=500) is False  # 2305 rows < 4 x 600
    put(coll, "m1", make_chunks("m1", ["more"] * 100), more[1700:].tolist())
    assert coll.ensure_indexes(min_rows=500) is True  # 2405 rows: retrained
    assert coll.ensure_indexes(min_rows=500) is False
    assert [i.type for i in coll.indexes() if i.name == "vector_idx"] == ["IvfSq"]
    # the row itself comes first: SQ distances re-ranked with the exact vectors
    for i in (3, 500, 1750):
        doc, ordinal = ("m0", i) if i < 1700 else ("m1", i - 1700)
        assert vector_search(coll, more[i].tolist(), 1)[0].chunk_id == f"{doc}:{ordinal}"


def test_an_ivf_pq_index_from_an_earlier_version_is_replaced(coll):
    from lancedb.index import IvfPq

    data = _clustered(600, seed=2)
    put(coll, "d", make_chunks("d", [f"c {i}" for i in range(600)]), data.tolist())
    coll.table.create_index(
        "vector",
        config=IvfPq(distance_type="cosine", num_partitions=2, num_sub_vectors=4),
        name="vector_idx",
    )
    coll._changed()
    # until then it is searched with the re-ranking PQ needs
    assert coll._refine_factor() == 30
    assert vector_search(coll, data[7].tolist(), 1)[0].chunk_id == "d:7"
    assert coll.ensure_indexes(min_rows=500) is True
    assert [i.type for i in coll.indexes() if i.name == "vector_idx"] == ["IvfSq"]
    assert coll._refine_factor() == 2
    assert coll.ensure_indexes(min_rows=500) is False


def test_rows_without_vectors_mark_the_collection_pending(coll):
    put(coll, "a", make_chunks("a", ["x", "y"]), unit_vectors(2))
    coll.mark_pending(False)  # what ingest records after counting
    assert coll.count_with_vectors() == 2
    # a writer storing a row without its vector flips the mark first, so the cheap count
    # (rows, when nothing is pending) is never used while one is missing
    b = make_chunks("b", ["z", "w"])
    put(coll, "b", b, [unit_vectors(1)[0], None])
    assert coll.pending_marked() is True
    assert coll.count_with_vectors() == 3
    # the embedding cache offers only texts that have a vector
    assert embed_hash(b[0]) in coll.embedded_hashes()
    assert embed_hash(b[1]) not in coll.embedded_hashes()
    coll.write_documents(["c"], make_chunks("c", ["v"]), [None], append=True)
    assert coll.count_with_vectors() == 3 and coll.count() == 5


def test_a_writer_store_keeps_its_metadata_cache_bounded(tmp_path, monkeypatch):
    """LanceDB caches the manifest of every version committed; a store opened to write
    (ingest) keeps that cache near its cap, where LanceDB's default (1 GiB) lets it grow
    with the commits."""
    from localgpt_cli.rag.store import collection as store_collection

    sizes = {}
    for cap in (1 << 30, 64 << 10):
        monkeypatch.setattr(store_collection, "WRITER_METADATA_CACHE_BYTES", cap)
        store = open_store(tmp_path / f"db{cap}", writer=True)
        coll = store.collection("notes", create=True)
        for i in range(20):
            put(coll, f"d{i}", make_chunks(f"d{i}", [f"text {i}"]), unit_vectors(1, i))
        assert coll.count() == 20 and len(keyword_search(coll, "text", 50)) == 20
        sizes[cap] = store.session.size_bytes
    assert sizes[64 << 10] < 96 << 10 < sizes[1 << 30], sizes
