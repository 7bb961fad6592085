"""The pipeline's parts on their own: the shipped schemas and their checker (against
jsonschema), the stand-in's structured output, the shaper's deterministic fallback and
the prompt builder's authority order."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localgpt_cli.kernel.answer import schema as schemas
from localgpt_cli.kernel.answer.prompt import NO_SOURCE_NOTE, fit_passages, pinned_blocks
from localgpt_cli.kernel.answer.shaper import fallback_query, leans_on_context
from localgpt_cli.kernel.answer.stage import ModelCaller, PipelineState, StageFallback
from localgpt_cli.kernel.grounding import ContextFile
from localgpt_cli.llm.ollama import OllamaClient
from tests.standin import Reply
from tests.standin_format import instance

NAMES = ("shape", "audit", "rerank", "gate", "condensed")


@pytest.mark.parametrize("name", NAMES)
def test_shipped_schemas_are_valid_and_the_stand_ins_answers_meet_them(name):
    shipped = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(shipped)
    value = instance(schemas.with_ids(shipped, ["P1", "P2"]), "what is a tunnel?")
    jsonschema.validate(value, shipped)
    assert schemas.problem(value, shipped) is None


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-20, 20) | st.text(max_size=8)
    | st.sampled_from(["P1", "P22", "lookup", "same", "supports", "x" * 700]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["query", "intent", "domain", "scope", "facts", "text",
                                       "cites", "constraints", "open_issues", "id",
                                       "verdict", "relevance", "scores", "verdicts", "x"]),
                      inner, max_size=5),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(value=JSONISH, name=st.sampled_from(NAMES))
def test_the_checker_agrees_with_jsonschema(value, name):
    shipped = schemas.load(name)
    valid = jsonschema.Draft202012Validator(shipped).is_valid(value)
    assert (schemas.problem(value, shipped) is None) == valid


def test_the_checker_names_where_an_answer_breaks_the_schema():
    condensed = schemas.load("condensed")
    bad = {"facts": [{"text": "x", "cites": ["S1"]}], "constraints": [], "open_issues": []}
    found = schemas.problem(bad, condensed)
    assert found == "at $.facts[0].cites[0]: 'S1' does not match ^P[0-9]+$"
    assert "'query' is missing" in str(schemas.problem({}, schemas.load("shape")))


def test_with_ids_restricts_every_citation_to_the_kept_passages():
    sent = schemas.with_ids(schemas.load("condensed"), ["P1", "P3"])
    assert "$ref" not in json.dumps(sent) and "$defs" not in sent
    cites = sent["properties"]["open_issues"]["items"]["properties"]["cites"]["items"]
    assert cites == {"type": "string", "enum": ["P1", "P3"]}


@pytest.mark.parametrize("question,joined", [
    ("and how do I undo that?", True), ("what about it", True), ("why?", True),
    ("how do I configure the office wireguard profile on linux", False),
])
def test_the_shapers_fallback_joins_only_what_leans_on_the_turn_before(question, joined):
    assert leans_on_context(question) is joined
    expected = f"set up the VPN {question}" if joined else question
    assert fallback_query(question, ["set up the VPN"]) == expected
    assert fallback_query(question, []) == question


def test_the_prompt_builder_keeps_the_authority_order():
    state = PipelineState(question="q", query="q", kept=[
        {"id": "P1", "path": "notes/vpn.md", "chunk": 0, "text": "install wireguard"}])
    blocks = [b["content"] for b in pinned_blocks("RULES", ["memo one"], "FILES", state)]
    assert blocks[0] == "RULES" and blocks[1].startswith("Project memory")
    assert blocks[2] == "FILES" and "[Source: notes/vpn.md, chunk 0]" in blocks[3]
    state.condensed = {"facts": [{"text": "use wireguard", "cites": ["P1"]}],
                       "constraints": [], "open_issues": []}
    s_ctx = pinned_blocks(None, [], None, state)[0]["content"]
    assert "- use wireguard [Source: notes/vpn.md, chunk 0]" in s_ctx
    assert "install wireguard" not in s_ctx  # S_ctx replaces the passages
    state.kept = []
    (note,) = pinned_blocks(None, [" "], None, state)
    assert note["content"] == NO_SOURCE_NOTE.format(query="q")


def test_passages_beyond_the_budget_and_copies_of_attached_files_are_dropped(tmp_path):
    attached = tmp_path / "vpn.md"
    attached.write_text("install wireguard")
    kept = [{"id": f"P{i}", "rank": i, "path": str(tmp_path / f"doc{i}.md"), "chunk": 0,
             "text": "word " * 300} for i in range(1, 5)]
    kept.insert(1, {"id": "P9", "rank": 2, "path": str(attached), "chunk": 0, "text": "x"})
    state = PipelineState(question="q", query="q", kept=kept)
    fit_passages(state, [ContextFile(str(attached), "install wireguard")], budget=1000)
    assert [p["id"] for p in state.kept] == ["P1"]  # 400 tokens of room: one passage
    assert [(d["id"], d["stage"], d["reason"]) for d in state.dropped] == [
        ("P9", "prompt", "duplicate_of_file"), ("P2", "prompt", "budget"),
        ("P3", "prompt", "budget"), ("P4", "prompt", "budget")]
    big = PipelineState(question="q", query="q", kept=[dict(kept[0], text="word " * 900)])
    fit_passages(big, [], budget=1000)
    assert len(big.kept) == 1  # the best passage is never dropped for the budget


# --- the stand-in's `format` and the structured call through the real client ---------------


def test_the_stand_in_refuses_a_format_that_is_not_json_or_a_schema(standin):
    body = {"model": "llama3.2", "stream": False, "format": "yaml",
            "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{standin.url}/api/chat", json=body)
    assert r.status_code == 400
    assert r.json() == {"error": 'invalid format: expected "json" or a valid JSON schema'}
    r = httpx.post(f"{standin.url}/api/chat", json={**body, "format": "json"})
    assert r.status_code == 200 and json.loads(r.json()["message"]["content"]) == {}


def caller(standin, **kw) -> ModelCaller:
    return ModelCaller(OllamaClient(standin.url), "llama3.2", **kw)


@pytest.mark.parametrize("mode,reason", [
    ("prose", "not_json"), ("invalid_json", "invalid_json"), ("schema", "schema"),
    ("empty", "empty"),
])
def test_the_structured_call_names_each_failure(standin, mode, reason):
    standin.format_mode = mode
    with pytest.raises(StageFallback) as failed:
        caller(standin).ask("sys", "Question: what is a tunnel?", schemas.load("shape"), cap=64)
    assert failed.value.reason == reason


def test_the_structured_call_keeps_to_its_budget_and_timeout(standin):
    ask = caller(standin, budget=1, timeout=10)
    value = ask.ask("sys", "Question: what is a tunnel?", schemas.load("shape"), cap=64)
    assert value["query"] == "what is a tunnel?"
    with pytest.raises(StageFallback) as failed:
        ask.ask("sys", "Question: again", schemas.load("shape"), cap=64)
    assert failed.value.reason == "budget" and len(standin.format_requests()) == 1
    standin.script_format(Reply(content=['{"query": "late"}'], delay=2.0))
    with pytest.raises(StageFallback) as failed:
        caller(standin, timeout=0.5).ask("sys", "Question: q", schemas.load("shape"), cap=64)
    assert failed.value.reason == "timeout"
    standin.script_format(Reply(http_status=500, http_error="boom"))
    with pytest.raises(StageFallback) as failed:
        caller(standin).ask("sys", "Question: q", schemas.load("shape"), cap=64)
    assert failed.value.reason == "model_error"
