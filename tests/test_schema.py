"""`chat --schema` on the Ollama wire (issue 28): the concise form, the request's `format`,
validation with jsonschema, one retry, exit 6 with the raw answers on stderr and in the
history, and `localgpt schema`. Against the stand-in: its `format` answers are instances
of the schema, its `sloppy` model answers prose."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import invoke, validate_packets
from tests.standin import Reply

TRIAGE = "title, severity int, tags: list of short labels"
SCHEMA = {"type": "object", "required": ["title", "severity", "tags"], "properties": {
    "title": {"type": "string"}, "severity": {"type": "integer"},
    "tags": {"type": "string", "description": "list of short labels"}}}


def test_schema_command_prints_the_json_schema_of_the_concise_form():
    r = invoke("schema", "--json", TRIAGE)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == SCHEMA
    assert list(json.loads(r.stdout)["properties"]) == ["title", "severity", "tags"]
    lines = "title\nscore float: how sure, from 0 to 1\nok bool"
    props = json.loads(invoke("schema", "--json", lines).stdout)["properties"]
    assert props == {"title": {"type": "string"}, "ok": {"type": "boolean"},
                     "score": {"type": "number", "description": "how sure, from 0 to 1"}}


def test_bad_specs_are_one_line_with_exit_2_for_a_flag_and_6_for_a_file(tmp_path: Path):
    r = invoke("schema", "title, severity list")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr.startswith("localgpt: error: schema: field 'severity' has type 'list'")
    r = invoke("chat", "--schema", '{"type": "object",}', "q")
    assert r.exit_code == 2 and "--schema's inline JSON is not valid JSON (line 1" in r.stderr
    broken = tmp_path / "s.json"
    broken.write_text('{"type":\n  "object",,\n}')
    r = invoke("chat", "--schema", str(broken), "q")
    assert (r.exit_code, r.stdout) == (6, "")
    assert f"{broken} is not valid JSON (line 2, column 12)" in r.stderr
    broken.write_text('{"type": "objekt"}')
    r = invoke("chat", "--schema", str(broken), "q")
    assert r.exit_code == 6 and "is not a valid JSON Schema" in r.stderr
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr


def test_the_answer_is_one_compact_json_line_and_the_request_carries_the_schema(standin):
    r = invoke("chat", "--schema", TRIAGE, "triage this")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == '{"title":"triage this","severity":0,"tags":"triage this"}\n'
    assert r.stderr == ""
    (body,) = standin.chat_requests()
    assert body["format"] == SCHEMA and not body.get("tools")  # answers, does not call
    assert "JSON Schema" in body["messages"][0]["content"]


def test_a_schema_file_or_inline_json_is_sent_as_written(standin, tmp_path: Path):
    path = tmp_path / "person.json"
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}},
              "required": ["name"]}
    path.write_text(json.dumps(schema))
    for spec in (str(path), json.dumps(schema)):
        r = invoke("chat", "--schema", spec, "who?")
        assert (r.exit_code, r.stdout) == (0, '{"name":"who"}\n'), r.stderr
        assert standin.chat_requests()[-1]["format"] == schema


def test_json_mode_done_carries_structured(standin):
    r = invoke("chat", "--json", "--schema", "title", "name it")
    assert r.exit_code == 0, r.stderr
    packets = r.records()
    validate_packets(packets)
    assert packets[-1]["payload"]["structured"] == {"title": "name it"}


def test_a_sloppy_model_gets_one_retry_with_the_validators_message(standin):
    standin.add_sloppy()
    standin.script(Reply(content="Sure, the title is Disk full."),
                   Reply(content='{"title": "Disk full", "severity": 2}'), model="sloppy")
    r = invoke("chat", "-m", "sloppy", "--schema", "title, severity int", "triage")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == '{"title":"Disk full","severity":2}\n'
    assert "does not match the schema (the answer is prose, not JSON)" in r.stderr
    retry = standin.chat_requests()[-1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Sure, the title is Disk full."}
    assert "the answer is prose, not JSON" in retry[-1]["content"]


def test_a_schema_violation_twice_is_exit_6_nothing_on_stdout_and_both_kept(standin):
    bad = '{"title": "Disk full", "severity": "high"}'
    standin.script_format(Reply(content=bad), Reply(content=bad))
    r = invoke("chat", "--schema", "title, severity int", "triage")
    assert (r.exit_code, r.stdout) == (6, "")
    assert f"localgpt: answer 1, as the model wrote it:\n{bad}\n" in r.stderr
    assert "localgpt: answer 2: at $.severity: 'high' is not of type 'integer'" in r.stderr
    assert r.stderr.endswith("localgpt: error: the answer does not match the schema (at "
                             "$.severity: 'high' is not of type 'integer'), also after a "
                             "retry.\n")
    shown = invoke("history", "show", "--json", "latest")
    (answer,) = [m for m in shown.records() if m.get("role") == "assistant"]
    assert answer["content"] == bad
    assert answer["metadata"]["error"]["code"] == "schema_mismatch"
    attempts = answer["metadata"]["structured"]["attempts"]
    assert [a["raw"] for a in attempts] == [bad, bad]
    assert "'high' is not of type 'integer'" in attempts[0]["error"]


def test_schema_multi_prints_the_array_and_sends_an_object_holding_it(standin):
    standin.script_format(Reply(content='{"items": [{"name": "Ann", "role": "chair"}, '
                                        '{"name": "Bo", "role": "notes"}]}'))
    r = invoke("chat", "--schema-multi", "name, role", "who attended?")
    assert (r.exit_code, r.stdout) == (0, '[{"name":"Ann","role":"chair"},'
                                          '{"name":"Bo","role":"notes"}]\n'), r.stderr
    sent = standin.chat_requests()[-1]["format"]
    assert sent["properties"]["items"]["items"]["required"] == ["name", "role"]
    r = invoke("chat", "--schema", "a", "--schema-multi", "b", "q")
    assert r.exit_code == 2 and "either --schema or --schema-multi" in r.stderr


def test_it_composes_with_stdin_and_file_and_tools_only_when_asked(standin, tmp_path: Path):
    notes = tmp_path / "minutes.txt"
    notes.write_text("Ann chaired the meeting.")
    r = invoke("chat", "--schema", "title", "-f", str(notes), "name it",
               input="The disk is full.\n")
    assert (r.exit_code, r.stdout) == (0, '{"title":"The disk is full."}\n'), r.stderr
    body = standin.chat_requests()[-1]
    assert any("Ann chaired the meeting." in m["content"] for m in body["messages"])
    assert body["messages"][-1]["content"] == "The disk is full.\n\nname it"
    assert not body.get("tools")
    r = invoke("chat", "--schema", "title", "-T", "calculator", "what is 2+2?")
    assert r.exit_code == 0, r.stderr
    offered = standin.chat_requests()[-2]  # the tool phase, then the structured answer
    assert [t["function"]["name"] for t in offered["tools"]] == ["calculator"]
    assert "format" not in offered and standin.chat_requests()[-1]["format"]


def test_each_writes_one_record_per_input_in_order_with_failures_in_place(standin):
    standin.script_format(Reply(content="nope"), Reply(content="nope"))  # the first input
    r = invoke("chat", "--schema", "label", "--each", "classify",
               input="disk full\n\nvpn down\nprinter jam\n")
    assert r.exit_code == 5
    lines = r.stdout.splitlines()
    first = json.loads(lines[0])
    assert (first["type"], first["input_id"], first["code"]) == ("error", "1", "schema_mismatch")
    assert lines[1:] == ['{"type":"structured","input_id":"3","value":{"label":"vpn down"}}',
                         '{"type":"structured","input_id":"4","value":{"label":"printer jam"}}']
    asked = [b["messages"][-1]["content"] for b in standin.chat_requests()]
    assert asked[-2:] == ["vpn down\n\nclassify", "printer jam\n\nclassify"]


def test_each_with_nul_separated_inputs_and_the_usage_errors(standin):
    r = invoke("chat", "--schema", "label", "--each", "-0", input="two\nlines\0vpn\0")
    assert (r.exit_code, r.stdout) == (0, '{"type":"structured","input_id":"1","value":{'
                                          '"label":"two"}}\n{"type":"structured","input_id":'
                                          '"2","value":{"label":"vpn"}}\n'), r.stderr
    assert standin.chat_requests()[0]["messages"][-1]["content"] == "two\nlines"
    r = invoke("chat", "--each", "x", input="a\n")
    assert (r.exit_code, r.stdout) == (2, "")
    assert "--each and -0 answer each input with --schema" in r.stderr


def test_with_retrieval_the_passages_are_in_the_context_and_stdout_is_the_json(standin,
                                                                                tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "vpn.md").write_text("# VPN\n\nTo reset the VPN, run vpnctl reset.\n")
    assert invoke("ingest", str(notes)).exit_code == 0
    spec = "answer, source: the [Source: …] label of the passage used"
    r = invoke("chat", "--pipeline", "fast", "--schema", spec, "how do I reset the VPN?")
    assert r.exit_code == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert set(json.loads(line)) == {"answer", "source"} and "Sources:" not in r.stderr
    body = standin.format_requests()[-1]
    grounding = next(m["content"] for m in body["messages"][1:] if "[Source:" in m["content"])
    assert "vpnctl reset" in grounding and "vpn.md" in grounding
