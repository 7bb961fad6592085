"""The answer pipeline end to end (kernel/answer/): the shaper, the model reranker and
gate, the condenser, the audit and its single re-run, the prompt builder, and what the
`sources` packet and `chat --explain` say about them; every fallback, through the real
client and the stand-in's structured output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import invoke, validate_packets
from tests.kb import make_corpus
from tests.standin import Reply

QUESTION = "how do I set up the VPN with wireguard?"


@pytest.fixture
def corpus(standin, tmp_path: Path) -> Path:
    notes = make_corpus(tmp_path)
    r = invoke("ingest", str(notes))
    assert r.exit_code == 0, r.stderr
    return notes


def ask(*args: str) -> tuple[dict, dict, list[dict]]:
    """`chat --json ARGS`: (sources payload, done payload, all packets), checked."""
    r = invoke("chat", "--json", "--no-tools", *args)
    assert r.exit_code == 0, r.stderr
    packets = r.records()
    validate_packets(packets)
    sources = next(p["payload"] for p in packets if p["type"] == "sources")
    return sources, packets[-1]["payload"], packets


def answer_system(standin) -> list[str]:
    """The system messages of the answer request (the last one, without `format`)."""
    body = [b for b in standin.chat_requests() if not b.get("format")][-1]
    return [m["content"] for m in body["messages"] if m["role"] == "system"]


def stage(sources: dict, name: str, round_: int = 1) -> dict:
    return next(s for s in sources["stages"] if s["stage"] == name
                and s.get("round", 1) == round_)


def write_config(isolated_env: Path, text: str) -> None:
    path = isolated_env / "config" / "localgpt" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- the full pipeline, as it goes when the model does its part ----------------------------


def test_a_first_question_over_short_passages_makes_no_stage_call(standin, corpus):
    """Nothing to resolve, passages that already fit: the full pipeline is as quick as
    the fast one, and says which stages it skipped and why."""
    standin.script(Reply(content="Install wireguard."))
    sources, done, _ = ask(QUESTION)
    assert standin.format_requests() == []
    assert [(s["stage"], s["status"], s.get("reason")) for s in sources["stages"]] == [
        ("shaper", "skipped", "no_history"), ("retriever", "ok", None),
        ("condenser", "skipped", "passages_fit"), ("audit", "skipped", "not_condensed")]
    assert sources["query"] == QUESTION and sources["fallback_reason"] == "passages_fit"
    assert done["grounded"] is True


def test_full_pipeline_reports_every_stage_and_sends_s_ctx(standin, corpus):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    standin.script(Reply(content="Install wireguard [Source: vpn.md, chunk 0]."))
    sources, done, packets = ask("-c", "--condense", QUESTION)
    assert [s["stage"] for s in sources["stages"]] == ["shaper", "retriever", "condenser", "audit"]
    assert all(s["status"] == "ok" for s in sources["stages"])
    assert sources["pipeline"] == "full" and sources["rerun"] is False
    assert sources["query"] == QUESTION and sources["intent"] == "lookup"
    kept_ids = [p["id"] for p in sources["kept"]]
    assert kept_ids and all(c in kept_ids for s in ("facts", "constraints", "open_issues")
                            for item in sources["condensed"][s] for c in item["cites"])
    assert sources["fallback_reason"] is None and done["grounded"] is True
    reasons = {"threshold": "below_threshold", "rerank": "rerank_cutoff", "gate": "gate"}
    assert all(reasons[d["stage"]] == d["reason"] for d in sources["dropped"])
    block = next(c for c in answer_system(standin) if "condensed" in c)
    assert "[Source: " in block and "Facts:" in block
    assert "".join(p["payload"] for p in packets if p["type"] == "token").startswith("Install")


def test_stage_calls_use_the_schema_and_never_think(standin, corpus):
    invoke("chat", "--no-tools", "-m", "qwen3", "how do I set up the VPN?")
    ask("-c", "--condense", "-m", "qwen3", "--think", QUESTION)
    stage_calls = standin.format_requests()
    assert len(stage_calls) == 3  # shaper, condenser, audit
    for body in stage_calls:
        assert body["think"] is False and body["stream"] is False
        assert body["format"]["type"] == "object" and body["options"]["temperature"] == 0
    # each answer capped to what its schema needs: shaper, condenser (two passages), audit
    assert [b["options"]["num_predict"] for b in stage_calls] == [192, 64 + 2 * 160, 224]
    condenser = stage_calls[1]["format"]
    cites = condenser["properties"]["facts"]["items"]["properties"]["cites"]["items"]
    assert cites["enum"][0] == "P1"  # citations constrained to the kept passages
    answer = [b for b in standin.chat_requests() if not b.get("format")][-1]
    assert answer["think"] is True


def test_at_most_four_extra_requests_and_five_with_the_rerun(standin, corpus):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    judged = ("-c", "--condense", "--reranker", "model", "--gate", "model")
    ask(*judged, QUESTION)
    assert len(standin.format_requests()) == 4  # shaper, rerank, gate, condenser
    first = len(standin.format_requests())
    sources, _, _ = ask(*judged, QUESTION)
    assert stage(sources, "audit") == {**stage(sources, "audit"), "status": "fallback",
                                       "reason": "budget"}
    assert len(standin.format_requests()) - first == 4
    # the re-run: the audit changes the scope, one more request is allowed, never two
    audit = {"scope": "changed", "intent": "howto", "domain": "networking",
             "query": "wireguard tunnel drops restart"}
    standin.script_format(
        Reply(content=json.dumps({"query": QUESTION, "intent": "howto", "domain": "vpn"})),
        Reply(content=json.dumps({"facts": [{"text": "install wireguard", "cites": ["P1"]}],
                                  "constraints": [], "open_issues": []})),
        Reply(content=json.dumps(audit)),
    )
    before, embeds = len(standin.format_requests()), standin.embed_calls
    sources, _, _ = ask("-c", "--condense", QUESTION)
    assert len(standin.format_requests()) - before == 4  # 3 + the re-run's condenser
    assert standin.embed_calls - embeds == 2  # the query searched twice, never three times
    assert sources["rerun"] is True and sources["query"] == audit["query"]
    assert sources["intent"] == "howto" and sources["domain"] == "networking"
    assert [s["stage"] for s in sources["stages"] if s.get("round") == 2] == [
        "retriever", "condenser"]
    assert standin.pending_replies == 0


def test_a_follow_up_is_searched_with_the_turn_it_follows(standin, corpus):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    standin.script_format(Reply(content=json.dumps(
        {"query": "restart the wireguard VPN tunnel when it drops", "intent": "troubleshoot",
         "domain": "networking"})))
    sources, _, _ = ask("-c", "and if it drops?")
    assert sources["query"] == "restart the wireguard VPN tunnel when it drops"
    assert sources["question"] == "and if it drops?"
    shaper_call = standin.format_requests()[-1]
    assert "how do I set up the VPN?" in shaper_call["messages"][1]["content"]


def test_a_follow_up_after_a_turn_of_tool_calls_still_finds_that_turn(standin, corpus):
    """Two rounds of two tool calls store 8 messages after the question; the follow-up
    must still be joined to it (the shaper's earlier turns were the last 6 messages)."""
    sums = [{"name": "calculator", "arguments": {"expression": f"{n}+1"}} for n in (1, 2)]
    standin.script(Reply(tool_calls=sums), Reply(tool_calls=sums), Reply(content="Done."))
    first = invoke("chat", "--pipeline", "fast", "-T", "calculator", "how do I set up the VPN?")
    assert first.exit_code == 0, first.stderr
    sources, _, _ = ask("-c", "--pipeline", "fast", "and if it drops?")
    assert sources["query"] == "how do I set up the VPN? and if it drops?"


@pytest.mark.parametrize("mode,reason", [
    ("prose", "not_json"), ("invalid_json", "invalid_json"), ("schema", "schema"),
    ("empty", "empty"),
])
def test_shaper_fallback_joins_the_previous_turn(standin, corpus, mode, reason):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    standin.format_mode = mode
    sources, done, _ = ask("-c", "--condense", "and if it drops?")
    assert stage(sources, "shaper") == {**stage(sources, "shaper"), "status": "fallback",
                                        "reason": reason}
    assert sources["query"] == "how do I set up the VPN? and if it drops?"
    assert sources["condensed"] is None and sources["fallback_reason"] == reason
    assert done["reason"] == "stop"


def test_a_standalone_question_is_not_joined(standin, corpus):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    standin.format_mode = "prose"
    sources, _, _ = ask("-c", "which milk should I buy for the office kitchen?")
    assert sources["query"] == "which milk should I buy for the office kitchen?"


# --- fallbacks of the judging stages --------------------------------------------------------


def test_wrong_citations_fall_back_to_the_passages_verbatim(standin, corpus):
    standin.format_mode = "wrong_citations"
    r = invoke("chat", "--json", "--no-tools", "--condense", "--gate", "model", "--reranker",
               "model", QUESTION)
    assert r.exit_code == 0
    sources = next(p["payload"] for p in r.records() if p["type"] == "sources")
    for name in ("rerank_model", "gate_model", "condenser"):
        assert stage(sources, name)["reason"] == "unknown_citation"
    assert sources["condensed"] is None and sources["fallback_reason"] == "unknown_citation"
    assert any("Excerpts from the user's documents" in c for c in answer_system(standin))
    assert "the condenser stage fell back (unknown_citation)" in r.stderr


def test_a_stage_that_times_out_falls_back(standin, corpus, isolated_env):
    write_config(isolated_env, "[rag]\nstage_timeout = 0.3\n")
    standin.format_mode, standin.format_delay = "timeout", 1.5
    invoke("chat", "--no-tools", "--pipeline", "fast", "how do I set up the VPN?")
    standin.script(Reply(content="Install wireguard."))
    sources, done, packets = ask("-c", "--condense", QUESTION)
    assert {s["stage"]: s.get("reason") for s in sources["stages"]} == {
        "shaper": "timeout", "retriever": None, "condenser": "timeout",
        "audit": "not_condensed"}
    assert sources["query"] == QUESTION and done["grounded"] is True
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == "Install wireguard."


def test_a_stage_timeout_of_zero_names_the_file_it_came_from(standin, isolated_env):
    write_config(isolated_env, "[rag]\nstage_timeout = 0\n")
    r = invoke("chat", "hi")
    assert r.exit_code == 6 and r.stdout == "" and not standin.chat_requests()
    assert r.stderr.count("\n") == 1 and "rag.stage_timeout" in r.stderr
    assert "config.toml" in r.stderr and "Traceback" not in r.stderr


def test_a_stage_that_raises_is_an_error_packet_not_a_lost_answer(standin, corpus, monkeypatch):
    from localgpt_cli.kernel.answer import condenser

    def broken(self, state):
        raise RuntimeError("condenser bug")

    monkeypatch.setattr(condenser.Condenser, "run", broken)
    standin.script(Reply(content="Still answered."))
    r = invoke("chat", "--json", "--no-tools", QUESTION)
    assert r.exit_code == 0
    packets = r.records()
    validate_packets(packets)
    error = next(p["payload"] for p in packets if p["type"] == "error")
    assert error["code"] == "stage_error" and "condenser bug" in error["message"]
    assert "".join(p["payload"] for p in packets if p["type"] == "token") == "Still answered."
    sources = next(p["payload"] for p in packets if p["type"] == "sources")
    assert stage(sources, "condenser")["status"] == "error"
    assert sources["fallback_reason"] == "error"


# --- the gate, the prompt builder, grounded ------------------------------------------------


def verdicts(verdict: str, n: int) -> Reply:
    return Reply(content=json.dumps(
        {"verdicts": [{"id": f"P{i}", "verdict": verdict} for i in range(1, n + 1)]}))


def test_model_gate_keeping_nothing_means_no_sources_and_grounded_false(standin, corpus):
    standin.script_format(
        verdicts("unrelated", 2),  # the two passages the retriever keeps here
    )
    sources, done, _ = ask("--gate", "model", QUESTION)
    assert sources["kept"] == [] and sources["results"] == []
    gated = [d for d in sources["dropped"] if d["stage"] == "gate"]
    assert gated and all(d["reason"] == "gate" and d["verdict"] == "unrelated" for d in gated)
    assert stage(sources, "condenser")["status"] == "skipped"
    assert sources["fallback_reason"] == "nothing_kept"
    assert done["grounded"] is False
    system = answer_system(standin)
    assert not any("[Source:" in c for c in system)
    assert any("No document in the user's knowledge base covered this question" in c
               for c in system)


def test_an_empty_verdict_list_falls_back_to_what_the_score_gate_kept(standin, corpus):
    standin.script_format(
        Reply(content=json.dumps({"verdicts": []})),
    )
    sources, done, _ = ask("--gate", "model", QUESTION)
    assert stage(sources, "gate_model")["reason"] == "schema"
    assert len(sources["kept"]) == 2 and done["grounded"] is True


def test_model_gate_theta_keeps_partial_support(standin, corpus):
    standin.script_format(
        Reply(content=json.dumps({"verdicts": [{"id": "P1", "verdict": "supports"},
                                               {"id": "P2", "verdict": "partial"}]})),
    )
    sources, done, _ = ask("--gate", "model", QUESTION)
    assert [p["scores"]["model_gate"] for p in sources["kept"]][:2] == [1.0, 0.5]
    assert done["grounded"] is True


def test_the_model_stages_ask_for_one_item_per_passage_at_most(standin, corpus):
    """A server that turns the schema into a grammar (llama.cpp) must stop a small model
    that repeats verdicts until its context is full: SmolLM2-135M did, for 120 s."""
    sources, _, _ = ask("--gate", "model", "--reranker", "model", QUESTION)
    sent = {name: b["format"]["properties"][name] for b in standin.format_requests()
            for name in ("scores", "verdicts") if name in b["format"].get("properties", {})}
    assert set(sent) == {"scores", "verdicts"}
    for array in sent.values():
        assert array["maxItems"] == len(sources["kept"]) == 2
        assert array["items"]["properties"]["id"]["enum"] == ["P1", "P2"]


def test_model_reranker_reorders_by_the_models_scores(standin, corpus):
    sources, _, _ = ask("--pipeline", "fast", QUESTION)
    first = [(p["path"], p["chunk"]) for p in sources["kept"]]
    assert len(first) >= 2
    standin.script_format(
        Reply(content=json.dumps({"scores": [{"id": "P1", "relevance": 2},
                                             {"id": "P2", "relevance": 9}]})),
    )
    sources, _, _ = ask("--reranker", "model", QUESTION)
    again = [(p["path"], p["chunk"]) for p in sources["kept"]]
    assert again[0] == first[1] and again[1] == first[0]
    assert [p["rank"] for p in sources["kept"]] == list(range(1, len(again) + 1))
    assert sources["kept"][0]["scores"]["model_rerank"] == 0.9


def test_a_passage_of_an_attached_file_is_dropped_as_duplicate(standin, corpus):
    sources, done, _ = ask("--no-condense", "-f", str(corpus / "vpn.md"), QUESTION)
    dup = [d for d in sources["dropped"] if d["reason"] == "duplicate_of_file"]
    assert dup and all(d["stage"] == "prompt" and d["path"].endswith("vpn.md") for d in dup)
    assert not any(p["path"].endswith("vpn.md") for p in sources["kept"])
    system = answer_system(standin)
    files = next(i for i, c in enumerate(system) if c.startswith("Files the user attached"))
    assert not any("No document" in c for c in system)
    assert all("vpn.md, chunk" not in c for c in system[files + 1:])


def test_fast_pipeline_makes_no_model_call(standin, corpus):
    sources, done, _ = ask("--pipeline", "fast", QUESTION)
    assert standin.format_requests() == []
    assert [s["stage"] for s in sources["stages"]] == ["shaper", "retriever"]
    assert sources["pipeline"] == "fast" and sources["fallback_reason"] == "fast_pipeline"
    assert done["grounded"] is True


def test_no_condense_and_config(standin, corpus, isolated_env):
    invoke("chat", "--no-tools", "how do I set up the VPN?")
    sources, _, _ = ask("-c", "--no-condense", QUESTION)
    assert sources["fallback_reason"] == "disabled" and sources["condensed"] is None
    assert len(standin.format_requests()) == 1  # the shaper; no audit without S_ctx
    write_config(isolated_env, "[rag]\ncondense = false\npipeline = \"fast\"\n")
    sources, _, _ = ask("-c", QUESTION)
    assert sources["pipeline"] == "fast" and len(standin.format_requests()) == 1


@pytest.mark.parametrize("args,config,code", [
    (("--pipeline", "fast", "--gate", "model"), "", 2),
    (("--pipeline", "fast", "--reranker", "model"), "", 2),
    ((), "[rag]\npipeline = \"turbo\"\n", 6),
])
def test_contradicting_pipeline_options_are_refused(standin, corpus, isolated_env, args,
                                                    config, code):
    write_config(isolated_env, config)
    r = invoke("chat", *args, QUESTION)
    assert r.exit_code == code and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr and standin.chat_requests() == []


def test_bad_rag_settings_are_refused(standin, corpus, isolated_env):
    write_config(isolated_env, "[rag]\ncondense = \"maybe\"\n")
    r = invoke("chat", QUESTION)
    assert r.exit_code == 6 and "rag.condense" in r.stderr
    write_config(isolated_env, "[rag]\ncondens = false\n")
    r = invoke("chat", QUESTION)
    assert r.exit_code == 6 and "rag.condens" in r.stderr


def test_explain_prints_the_table_on_stderr(standin, corpus):
    standin.script(Reply(content="Install wireguard."))
    r = invoke("chat", "--no-tools", "--explain", "--condense", QUESTION)
    assert r.exit_code == 0 and r.stdout == "Install wireguard.\n"
    lines = r.stderr.splitlines()
    assert lines[0] == f"searched: {QUESTION}"
    assert "status\tid\tpassage\tscores\twhy" in lines
    kept = [line for line in lines if line.startswith("kept\tP1\t")]
    assert kept and "vpn.md (chunk 0)" in kept[0] and "fused=" in kept[0]
    assert any(line.startswith("dropped\tX1\t") and line.endswith("threshold: below_threshold")
               for line in lines)
    assert "stages: shaper skipped (no_history), retriever ok, condenser ok, audit ok" in lines
    assert any(line.startswith("condensed: 1 facts") for line in lines)
    assert "Sources:" in r.stderr


def test_explain_tells_the_model_gate_from_the_score_gate(standin, corpus):
    standin.script_format(
        verdicts("unrelated", 2),
    )
    standin.script(Reply(content="No idea."))
    r = invoke("chat", "--no-tools", "--explain", "--gate", "model", QUESTION)
    assert r.exit_code == 0
    gated = [line for line in r.stderr.splitlines() if line.startswith("dropped\t")
             and line.endswith("gate: gate (unrelated)")]  # fmt: skip
    assert len(gated) == 2, r.stderr


def test_without_explain_plain_output_is_unchanged(standin, corpus):
    standin.script(Reply(content="Install wireguard."))
    r = invoke("chat", "--no-tools", QUESTION)
    assert "searched:" not in r.stderr and r.stderr.startswith("Sources:")
