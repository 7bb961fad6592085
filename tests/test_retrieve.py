"""Retrieval on real LanceDB tables with constructed vectors: modes, fusion order,
threshold, filters (with quotes in paths), fallbacks to keyword, batch search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.rag.retrieve import search, search_many
from localgpt_cli.rag.store import Collection, open_store
from localgpt_cli.rag.store.rows import glob_to_like
from localgpt_cli.rag.types import Chunk

DIM = 8
QUERY = [1.0] + [0.0] * (DIM - 1)


def at_similarity(s: float, axis: int) -> list[float]:
    """A unit vector whose cosine similarity with QUERY is exactly `s`."""
    v = [0.0] * DIM
    v[0], v[axis] = s, math.sqrt(1 - s * s)
    return v


def add(coll: Collection, doc: str, text: str, vector, path: str | None = None, type="text"):
    chunk = Chunk(doc, path or f"{doc}.txt", type, 0, text)
    coll.write_documents([doc], [chunk], [vector], append=False)


@pytest.fixture
def coll(tmp_path) -> Collection:
    """A: both sides like it; B: keyword top, vector far; C, D: vector only; E: weak vector."""
    c = open_store(tmp_path / "db").collection("kb", create=True)
    add(c, "A", "apple banana", at_similarity(0.9, 1))
    add(c, "B", "apple apple apple", at_similarity(0.1, 2))
    add(c, "C", "cherry tart", at_similarity(0.8, 3))
    add(c, "D", "date loaf", at_similarity(0.6, 4))
    add(c, "E", "elderberry wine", at_similarity(0.3, 5))
    return c


def ids(result) -> list[str]:
    return [h.document_id for h in result.hits]


def test_vector_mode_orders_by_cosine_and_drops_below_threshold(coll):
    res = search(coll, "apple", QUERY, k=5, mode="vector", threshold=0.5)
    assert res.mode_used == "vector" and res.warnings == []
    assert ids(res) == ["A", "C", "D"]
    assert [round(h.score, 4) for h in res.hits] == [0.9, 0.8, 0.6]
    assert [h.rank for h in res.hits] == [1, 2, 3]
    assert [(d.document_id, round(d.score, 4), d.reason) for d in res.dropped] == [
        ("E", 0.3, "below_threshold"),
        ("B", 0.1, "below_threshold"),
    ]
    # without a threshold every vector comes back, and k still caps the list
    assert ids(search(coll, "apple", QUERY, k=4, mode="vector", threshold=None)) == [
        "A",
        "C",
        "D",
        "E",
    ]


def test_keyword_mode_is_bm25(coll):
    res = search(coll, "apple", QUERY, k=5, mode="keyword")
    assert ids(res) == ["B", "A"]  # three "apple"s outrank one
    assert res.hits[0].score > res.hits[1].score > 0
    assert res.dropped == []


def test_hybrid_fuses_by_reciprocal_rank(coll):
    # vector ranks: A1 C2 D3 E4 B5; keyword ranks: B1 A2.
    res = search(coll, "apple", QUERY, k=5, mode="hybrid", threshold=None)
    assert res.mode_used == "hybrid"
    assert ids(res) == ["A", "B", "C", "D", "E"]
    a, b = res.hits[0], res.hits[1]
    assert a.score == pytest.approx(1 / 61 + 1 / 62)
    assert b.score == pytest.approx(1 / 65 + 1 / 61)
    assert (a.extra["vector_rank"], a.extra["keyword_rank"]) == (1, 2)
    assert (b.extra["vector_rank"], b.extra["keyword_rank"]) == (5, 1)
    assert res.hits[2].extra["keyword_rank"] is None
    # a side's weight moves the order: keyword-only weight puts B first
    res = search(coll, "apple", QUERY, k=2, threshold=None, vector_weight=0.0)
    assert ids(res) == ["B", "A"]
    # the RRF constant is a parameter
    res = search(coll, "apple", QUERY, k=1, threshold=None, rrf_k=1)
    assert res.hits[0].score == pytest.approx(1 / 2 + 1 / 3)


def test_hybrid_threshold_spares_keyword_matches(coll):
    res = search(coll, "apple", QUERY, k=5, mode="hybrid", threshold=0.5)
    # B is far by vector (0.1) but matched the words: kept; E only had its weak vector.
    assert ids(res) == ["A", "B", "C", "D"]
    assert [d.document_id for d in res.dropped] == ["E"]


def test_fallback_to_keyword_without_query_vector(coll):
    res = search(coll, "apple", None, k=5)
    assert res.mode_used == "keyword"
    assert ids(res) == ["B", "A"]
    assert len(res.warnings) == 1 and "keyword" in res.warnings[0]


def test_fallback_to_keyword_when_collection_has_no_vectors(tmp_path):
    c = open_store(tmp_path / "db").collection("bare", create=True)
    c.write_documents(["X"], [Chunk("X", "x.md", "markdown", 0, "vpn setup notes")], None,
                      append=False)
    res = search(c, "vpn", [0.5] * DIM, k=3, mode="vector")
    assert res.mode_used == "keyword"
    assert ids(res) == ["X"]
    assert "no embeddings" in res.warnings[0]


def test_fallback_when_every_stored_vector_is_pending(tmp_path):
    c = open_store(tmp_path / "db").collection("kb", create=True, dim=DIM)
    c.write_documents(["X"], [Chunk("X", "x.md", "markdown", 0, "vpn setup notes")], [None],
                      append=False)
    res = search(c, "vpn", QUERY, k=3)
    assert res.mode_used == "keyword" and ids(res) == ["X"]
    c.set_vectors(["X:0"], [at_similarity(0.9, 1)])
    res = search(c, "vpn", QUERY, k=3)
    assert res.mode_used == "hybrid" and res.warnings == []
    assert res.hits[0].extra["vector_rank"] == 1


def test_prefilters_still_return_k(tmp_path):
    c = open_store(tmp_path / "db").collection("kb", create=True)
    # 25 close code chunks would fill any post-filtered candidate pool of 20
    for i in range(25):
        add(c, f"code{i}", f"function {i}", at_similarity(0.99 - i * 0.001, 1 + i % 7), type="code")
    for i in range(5):
        add(c, f"pdf{i}", f"report {i}", at_similarity(0.2 + i * 0.01, 1 + i % 7), type="pdf")
    res = search(c, "report", QUERY, k=5, mode="vector", threshold=None, type="pdf")
    assert sorted(ids(res)) == [f"pdf{i}" for i in range(5)]
    res = search(c, "function", QUERY, k=3, mode="hybrid", threshold=None, document_id="code7")
    assert ids(res) == ["code7"]


def test_path_glob_with_quotes_and_sql_wildcards(tmp_path):
    c = open_store(tmp_path / "db").collection("kb", create=True)
    add(c, "q", "budget notes", at_similarity(0.9, 1), path="it's/o'neil_2024%.md")
    add(c, "u", "budget notes", at_similarity(0.9, 2), path="it's/oXneilX2024X.md")
    add(c, "p", "budget notes", at_similarity(0.9, 3), path="docs/plan.md")
    res = search(c, "budget", QUERY, k=5, path_glob="it's/o'neil_2024%.md")
    assert ids(res) == ["q"]  # `_` and `%` are literal, `'` is escaped
    res = search(c, "budget", QUERY, k=5, path_glob="it's/*")
    assert sorted(ids(res)) == ["q", "u"]
    res = search(c, "budget", QUERY, k=5, path_glob="it's/o[!X]neil*", mode="keyword")
    assert ids(res) == ["q"]  # a character class is checked exactly after the SQL prefilter
    res = search(c, "budget", QUERY, k=5, type="it's", mode="keyword")
    assert res.hits == []
    res = search(c, "budget", QUERY, k=5, document_id="q' OR '1'='1")
    assert res.hits == []  # an injection attempt is just a document id that does not exist


@pytest.mark.parametrize(
    ("glob", "like", "exact"),
    [
        ("docs/*.md", "docs/%.md", True),
        ("a?c", "a_c", True),
        ("50%_off\\x", "50\\%\\_off\\\\x", True),
        ("src/[abc]*.py", "src/_%.py", False),
        ("x[!]]y", "x_y", False),
        ("unclosed[", "unclosed[", True),
    ],
)
def test_glob_to_like(glob, like, exact):
    assert glob_to_like(glob) == (like, exact)


def test_hit_carries_chunk_metadata(tmp_path):
    c = open_store(tmp_path / "db").collection("kb", create=True)
    chunk = Chunk("doc", "manual.pdf", "pdf", 3, "torque wrench settings", page=7, heading="Tools")
    c.write_documents(["doc"], [chunk], [at_similarity(0.95, 1)], append=False)
    hit = search(c, "torque", QUERY, k=1).hits[0]
    assert (hit.path, hit.chunk, hit.page, hit.heading, hit.type) == (
        "manual.pdf",
        3,
        7,
        "Tools",
        "pdf",
    )
    assert hit.text == "torque wrench settings"
    assert hit.extra["chunk_id"] == "doc:3"


def test_bad_arguments(coll):
    with pytest.raises(UsageError):
        search(coll, "apple", QUERY, mode="semantic")
    with pytest.raises(UsageError):
        search(coll, "apple", QUERY, k=0)
    with pytest.raises(UsageError):
        search(coll, "  ", None, mode="keyword")
    with pytest.raises(InvalidInput):
        search(coll, "apple", [1.0, 0.0], mode="vector")


def test_search_many_matches_single_searches(coll):
    rng = np.random.default_rng(0)
    queries = [("apple", QUERY), ("cherry", None), ("date", rng.standard_normal(DIM).tolist())]
    batch = search_many(coll, queries, k=3, threshold=None)
    single = [search(coll, t, v, k=3, threshold=None) for t, v in queries]
    assert [ids(r) for r in batch] == [ids(r) for r in single]
    assert [r.mode_used for r in batch] == ["hybrid", "keyword", "hybrid"]
