"""Metrics, qrels and query files of `localgpt eval`, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.evaluate import (
    DocumentNames,
    document_ranking,
    ndcg,
    parse_qrels,
    recall,
    reciprocal_rank,
    score_run,
)
from localgpt_cli.rag.queryfile import parse_questions

GRADES = {"a": 3, "b": 1, "c": 2, "z": 0}


def test_ndcg_by_hand():
    # ranking b, x, a: DCG = 1/log2(2) + 0 + 3/log2(4) = 1 + 1.5 = 2.5
    # ideal 3, 2, 1:   IDCG = 3 + 2/log2(3) + 1/2 = 3.5 + 1.26186 = 4.76186
    assert ndcg(["b", "x", "a"], GRADES, 10) == pytest.approx(2.5 / (3.5 + 2 / math.log2(3)))
    assert ndcg(["a", "c", "b"], GRADES, 10) == pytest.approx(1.0)
    # the ideal counts judged documents never retrieved; a cut at 1 keeps one of each
    assert ndcg(["c"], GRADES, 1) == pytest.approx(2 / 3)
    assert ndcg(["x", "a"], GRADES, 1) == 0.0
    assert ndcg([], GRADES, 10) == 0.0


def test_recall_and_reciprocal_rank_by_hand():
    assert recall(["x", "a", "z", "b"], GRADES, 10) == pytest.approx(2 / 3)  # z is grade 0
    assert recall(["x", "a", "z", "b"], GRADES, 2) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "z", "c"], GRADES, 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "z", "c"], GRADES, 2) == 0.0


def test_documents_rank_at_their_best_chunk():
    assert document_ranking(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]


def test_score_run_means_and_missed_queries():
    judgements = {"q1": {"a": 2}, "q2": {"b": 1, "c": 1}, "q3": {"x": 0}}
    rankings = {"q1": ["a"], "q2": ["x", "y", "c"]}  # q3 has no relevant: not scored
    s = score_run(rankings, judgements, k=2)
    assert s.queries == 2
    assert s.ndcg == pytest.approx((1.0 + 0.0) / 2)
    assert s.recall == pytest.approx(0.5) and s.recall_100 == pytest.approx((1 + 0.5) / 2)
    assert s.mrr == pytest.approx(0.5) and s.no_relevant == 1
    assert s.named()["ndcg@2"] == s.ndcg and "recall@100" in s.named()
    with pytest.raises(InvalidInput, match="relevant"):
        score_run({}, {"q": {"a": 0}}, 10)


def test_qrels_forms_and_errors():
    q = parse_qrels("query-id\tcorpus-id\tscore\n1\tdoc1\t2\n\n1\tdoc2\t0\n2 0 d3 1\n", "q.tsv")
    assert q.grades == {"1": {"doc1": 2, "doc2": 0}, "2": {"d3": 1}}
    assert q.lines[("2", "d3")] == 5
    with pytest.raises(InvalidInput, match=r"q\.tsv:2: the grade 'high'"):
        parse_qrels("1\td\t1\n1\te\thigh\n", "q.tsv")
    with pytest.raises(InvalidInput, match=r"q\.tsv:1: expected"):
        parse_qrels("1\tonly-two\n", "q.tsv")
    with pytest.raises(InvalidInput, match=r"q\.tsv:2: .*again"):
        parse_qrels("1\td\t1\n1\td\t2\n", "q.tsv")
    with pytest.raises(InvalidInput, match="no judgements"):
        parse_qrels("query-id\tdoc\tscore\n", "q.tsv")


@pytest.mark.parametrize(
    "header",
    ["query-id\tcorpus-id\tscore", "query_id\tdoc_id\trelevance", "qid docno rel",
     "Query-ID\tDoc\tGrade", "query-id\titeration\tdoc\tscore", "topic Q0 docno rel"],
)  # fmt: skip
def test_a_header_is_recognised_by_its_names(header):
    q = parse_qrels(f"{header}\n1\td\t1\n", "q.tsv")
    assert q.grades == {"1": {"d": 1}} and q.lines == {("1", "d"): 2}


@pytest.mark.parametrize(
    ("first", "grade"),
    [("q1\tvpn\tl", "l"), ("q1\tvpn\t1.5", "1.5"), ("query-id\tdoc\tscroe", "scroe"),
     ("q1 0 vpn two", "two")],
)  # fmt: skip
def test_a_malformed_first_line_is_an_error_not_a_header(first, grade):
    with pytest.raises(InvalidInput, match=rf"q\.tsv:1: the grade '{grade}' is not an integer"):
        parse_qrels(f"{first}\nq1\ttodo\t1\n", "q.tsv")


def test_document_names():
    names = DocumentNames([("i1", "/data/notes/vpn.md"), ("i2", "/data/old/vpn.txt"),
                           ("i3", "/data/notes/todo.txt")])  # fmt: skip
    assert names.resolve("todo") == "i3"
    assert names.resolve("notes/vpn.md") == names.resolve("./notes/vpn") == "i1"
    assert names.resolve("/data/old/vpn.txt") == "i2"
    assert names.resolve("vpn.md") == "i1"
    assert names.resolve("tes/vpn.md") is None  # whole path parts only
    assert names.resolve("nothing") is None
    with pytest.raises(InvalidInput, match="fits 2"):
        names.resolve("vpn")


def test_query_file_lines():
    text = '{"id": "q1", "text": "vpn setup"}\n\nplain question?\n{"_id": 7, "text": " x "}\n'
    qs = parse_questions(text, "q.jsonl")
    assert [(q.id, q.text, q.line) for q in qs] == [
        ("q1", "vpn setup", 1), ("3", "plain question?", 3), ("7", "x", 4)
    ]  # fmt: skip
    for bad, message in (
        ('{"id": 1, "text": "a"\n', r"q:1: not valid JSON"),
        ('a\n{"id": 1}\n', r"q:2: .*\"text\""),
        ('["a"]\n', None),  # plain text: a list is not a JSON object line
        ('{"id": [1], "text": "a"}\n', r"q:1: \"id\""),
        ('x\n{"id": "1", "text": "y"}\n', r"q:2: query id '1' was already used on line 1"),
        ("\n\n", "no queries"),
    ):
        if message is None:
            assert parse_questions(bad, "q")[0].text == '["a"]'
            continue
        with pytest.raises(InvalidInput, match=message):
            parse_questions(bad, "q")
