"""A reranker a provider serves (`--rerank-model PROFILE:MODEL`, `[rag] rerank_model`):
the `/rerank` wire of llama.cpp's server, vLLM, Jina and Cohere, through the OpenAI
stand-in. What the user sees: the order of the hits, the `provider_rerank` score on each,
the gate judging by it, one clear line for a name that cannot work, and a search that
still answers (with a warning) when the reranker fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.openai_standin import OpenAIStandIn
from tests.test_providers import EMBED, KEY, posts, write_config

RERANKER = "bge-reranker-v2-m3"
PROFILE = '[providers.work]\nkind = "openai"\nbase_url = "{url}"\napi_key_env = "WORK_API_KEY"\n'
DOCS = {
    "a.txt": "Coolant pump maintenance happens every spring.",
    "b.txt": "The coolant pump bearing wears out: replace the bearing when the pump hums.",
    "c.txt": "Spring cleaning of the office kitchen.",
}


@pytest.fixture
def server(isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
           tmp_path: Path) -> Iterator[OpenAIStandIn]:  # fmt: skip
    """Profile `work` (embeddings and a reranker) with three documents ingested through it."""
    with OpenAIStandIn(models=("some-model", EMBED, RERANKER), key=KEY) as s:
        write_config(isolated_env, PROFILE.format(url=s.url))
        monkeypatch.setenv("WORK_API_KEY", KEY)
        docs = tmp_path / "docs"
        docs.mkdir()
        for name, text in DOCS.items():
            (docs / name).write_text(text + "\n")
        r = invoke("ingest", "--json", "-m", f"work:{EMBED}", str(docs))
        assert r.exit_code == 0, r.stderr
        yield s


def names(records: list[dict]) -> list[str]:
    return [Path(h["path"]).name for h in records if h.get("type", "hit") == "hit"]


def test_the_reranker_orders_the_hits_and_its_score_is_on_each(server):
    r = invoke("search", "--json", "--theta", "0", "--rerank-model", f"work:{RERANKER}",
               "pump bearing replace")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    hits = [h for h in r.records() if h["type"] == "hit"]
    # b.txt holds all three words, a.txt one of them: the stand-in scores 1.0 and 1/3.
    assert names(hits)[:2] == ["b.txt", "a.txt"]
    assert hits[0]["scores"]["provider_rerank"] == 1.0
    assert hits[1]["scores"]["provider_rerank"] == pytest.approx(1 / 3, abs=1e-6)
    (body,) = posts(server, "/v1/rerank")
    assert body["model"] == RERANKER and body["query"] == "pump bearing replace"
    assert len(body["documents"]) == body["top_n"] <= 20
    assert any("bearing wears out" in d for d in body["documents"])


def test_the_gate_keeps_what_the_reranker_finds_relevant_enough(server):
    r = invoke("search", "--json", "--theta", "0.5", "--rerank-model", f"work:{RERANKER}",
               "pump bearing replace")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert names(r.records()) == ["b.txt"]  # 1/3 < 0.5: a.txt is dropped by the gate


def test_logits_are_read_as_probabilities(server):
    server.rerank_logits = True  # llama.cpp's server sends the raw logit
    r = invoke("search", "--json", "--theta", "0.5", "--rerank-model", f"work:{RERANKER}",
               "pump bearing replace")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    hits = r.records()
    assert names(hits) == ["b.txt"]  # logit 6 -> 0.998; logit -2 -> 0.12 < 0.5
    assert 0.99 < hits[0]["scores"]["provider_rerank"] < 1.0


def test_the_config_names_the_reranker_for_search_and_chat(server, isolated_env):
    write_config(isolated_env, PROFILE.format(url=server.url)
                 + 'default_model = "some-model"\n'
                 + f'\n[rag]\nrerank_model = "work:{RERANKER}"\ntheta = 0.5\n')
    r = invoke("search", "--json", "pump bearing replace")
    assert r.exit_code == 0, r.stderr
    assert names(r.records()) == ["b.txt"]
    r = invoke("chat", "--json", "-p", "work", "--pipeline", "fast", "--rag",
               "pump bearing replace")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (sources,) = [p["payload"] for p in r.records() if p["type"] == "sources"]
    assert [Path(p["path"]).name for p in sources["kept"]] == ["b.txt"]
    assert sources["kept"][0]["scores"]["provider_rerank"] == 1.0
    assert len(posts(server, "/v1/rerank")) == 2


@pytest.mark.parametrize("value, message", [
    ("reranker", "a reranker is named PROFILE:MODEL"),
    (f"ollama:{RERANKER}", "serves no reranker"),
    (f"nowhere:{RERANKER}", "No provider profile 'nowhere'"),
])  # fmt: skip
def test_a_name_that_cannot_work_is_one_line_exit_2_from_the_flag(server, value, message):
    r = invoke("search", "--rerank-model", value, "pump")
    assert r.exit_code == 2
    assert message in r.stderr and "--rerank-model" in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2 and "Traceback" not in r.stderr
    assert not posts(server, "/v1/rerank")


def test_a_bad_name_in_the_config_file_exits_6(server, isolated_env):
    write_config(isolated_env, PROFILE.format(url=server.url) + '\n[rag]\nrerank_model = "x"\n')
    r = invoke("search", "pump")
    assert r.exit_code == 6
    assert "rerank_model in" in r.stderr and "config.toml" in r.stderr


@pytest.mark.parametrize("reply", [
    {"results": [{"index": 0}]},  # no score
    {"results": [{"index": 0, "relevance_score": 0.5}]},  # fewer than asked
    {"data": []},  # no results list
])  # fmt: skip
def test_a_failing_reranker_leaves_the_local_order_and_says_so(server, reply):
    server.rerank_reply = reply
    r = invoke("search", "--json", "--rerank-model", f"work:{RERANKER}", "pump bearing replace")
    assert r.exit_code == 0, r.stderr
    hits = [h for h in r.records() if h["type"] == "hit"]
    assert names(hits)[0] == "b.txt"  # the local reranker's order
    assert all("provider_rerank" not in h["scores"] for h in hits)
    assert "The reranker failed" in r.stderr


def test_eval_with_a_reranker_the_server_lacks_fails_instead_of_measuring_without_it(
        server, tmp_path):  # fmt: skip
    (tmp_path / "q.txt").write_text("pump bearing replace\n")
    (tmp_path / "qrels.tsv").write_text("1\tb\t1\n")
    args = ["eval", "--queries", str(tmp_path / "q.txt"), "--qrels", str(tmp_path / "qrels.tsv"),
            "--mode", "hybrid"]  # fmt: skip
    r = invoke(*args, "--json", "--rerank-model", "work:missing-reranker")
    assert r.exit_code == 4, r.stderr  # the model is not there: as for a chat model
    assert "missing-reranker" in r.stderr and "Traceback" not in r.stderr
    asked = len(posts(server, "/v1/rerank"))
    r = invoke(*args, "--json", "--rerank-model", f"work:{RERANKER}")
    assert r.exit_code == 0, r.stderr
    (ndcg,) = [m for m in r.records() if m["name"] == "ndcg@10"]
    assert ndcg["value"] == 1.0 and ndcg["rerank"] == f"local + work:{RERANKER}"
    assert len(posts(server, "/v1/rerank")) == asked + 1  # one request per question


def test_a_failing_reranker_in_keyword_mode_keeps_what_the_search_keeps_without_it(server):
    # Keyword mode has no similarity for the gate, so without a reranker every passage the
    # local reranker kept stays; a reranker that fails must leave exactly that.
    args = ["search", "--json", "--mode", "keyword", "--theta", "0.5", "pump spring kitchen"]
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    alone = names(r.records())
    assert len(alone) == 3
    server.rerank_reply = {"data": []}
    r = invoke(*args, "--rerank-model", f"work:{RERANKER}")
    assert r.exit_code == 0, r.stderr
    assert "The reranker failed" in r.stderr
    assert names(r.records()) == alone


def test_eval_stops_at_the_reranker_s_first_failure(server, tmp_path):
    # A reranker that is down would otherwise be asked (and waited for) once per question
    # before eval reports it.
    (tmp_path / "q.txt").write_text("pump bearing replace\ncoolant pump\nkitchen cleaning\n")
    (tmp_path / "qrels.tsv").write_text("1\tb\t1\n2\ta\t1\n3\tc\t1\n")
    r = invoke("eval", "--queries", str(tmp_path / "q.txt"), "--qrels",
               str(tmp_path / "qrels.tsv"), "--mode", "hybrid,keyword",
               "--rerank-model", "work:missing-reranker")  # fmt: skip
    assert r.exit_code == 4, r.stderr
    assert len(posts(server, "/v1/rerank")) == 1


def test_eval_gives_the_reranker_as_many_passages_as_search_does(server, tmp_path):
    # eval asks each mode for many passages (to rank 100 documents); the reranker must
    # still see what search -k K would give it, or the figures measure another pipeline.
    more = tmp_path / "more"
    more.mkdir()
    for i in range(40):
        (more / f"pump{i:02d}.txt").write_text(f"Pump note {i}: the pump bearing {i} hums.\n")
    r = invoke("ingest", "--json", "-m", f"work:{EMBED}", str(more))
    assert r.exit_code == 0, r.stderr
    (tmp_path / "q.txt").write_text("pump bearing replace\n")
    (tmp_path / "qrels.tsv").write_text("1\tb\t1\n")
    r = invoke("search", "--json", "-k", "3", "--theta", "0", "--rerank-model",
               f"work:{RERANKER}", "pump bearing replace")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (searched,) = posts(server, "/v1/rerank")
    r = invoke("eval", "--queries", str(tmp_path / "q.txt"), "--qrels",
               str(tmp_path / "qrels.tsv"), "--mode", "hybrid", "-k", "3",
               "--rerank-model", f"work:{RERANKER}")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    asked = posts(server, "/v1/rerank")[1:]
    assert asked and all(len(b["documents"]) == len(searched["documents"]) == 20 for b in asked)


def test_the_reranker_reads_a_title_once(server):
    # Every document here is one line, which is its title too: a first chunk already opens
    # with its title, so the passage sent is the text alone (as the embedder gets it).
    r = invoke("search", "--json", "--rerank-model", f"work:{RERANKER}", "pump bearing")
    assert r.exit_code == 0, r.stderr
    (body,) = posts(server, "/v1/rerank")
    assert sorted(body["documents"]) == sorted(DOCS.values())


def test_chat_refuses_a_bad_reranker_name_with_no_knowledge_base_too(standin, isolated_env):
    # As with --theta: the flag is checked before the model is asked, not only when a
    # collection happens to exist (else a typo passes silently until one does).
    r = invoke("chat", "--rerank-model", "reranker", "hi")
    assert r.exit_code == 2, r.stderr
    assert "--rerank-model" in r.stderr and "PROFILE:MODEL" in r.stderr
    write_config(isolated_env, '[rag]\nrerank_model = "ollama:bge"\n')
    r = invoke("chat", "hi")
    assert r.exit_code == 6, r.stderr
    assert "rerank_model in" in r.stderr and "serves no reranker" in r.stderr
    assert standin.chat_requests() == []


def test_search_queries_stops_asking_a_reranker_that_failed(server, tmp_path):
    # As with a failed embedding: one warning, and the other questions are not sent to a
    # server that just failed (one that hangs would be waited for once per question).
    server.rerank_reply = {"data": []}
    (tmp_path / "q.txt").write_text("pump bearing replace\ncoolant pump\nkitchen cleaning\n")
    r = invoke("search", "--json", "--queries", str(tmp_path / "q.txt"), "--rerank-model",
               f"work:{RERANKER}")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert {h["query_id"] for h in r.records() if h.get("type", "hit") == "hit"} == {
        "1", "2", "3"}
    assert r.stderr.count("The reranker failed") == 1
    assert len(posts(server, "/v1/rerank")) == 1
