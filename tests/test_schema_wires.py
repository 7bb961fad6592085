"""`chat --schema` on the OpenAI wire (`response_format`: json_schema, json_object where a
server has only that, nothing where it has neither) and on the SmolLM2 GGUF in process
(llama.cpp's grammar from the schema) (issue 28)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import invoke, run
from tests.openai_standin import Answer, OpenAIStandIn
from tests.test_llamacpp_stages import TURN_SECONDS, pocket

SPEC = "title, severity int"
SCHEMA = {"type": "object", "properties": {"title": {"type": "string"},
          "severity": {"type": "integer"}}, "required": ["title", "severity"]}  # fmt: skip
FALLBACK = ("localgpt: warning: some-model's server refused the JSON Schema; asking it for "
            "JSON and validating that.\n")
NO_CONSTRAINT = ("localgpt: warning: some-model's server cannot constrain its output; its "
                 "answers are validated against the schema instead (one retry).\n")


@pytest.fixture
def server(isolated_env: Path) -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as s:
        config = isolated_env / "config" / "localgpt" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[providers.work]\nkind = "openai"\nbase_url = "{s.url}"\n'
                          'default_model = "some-model"\n')
        yield s


def formats(server: OpenAIStandIn) -> list[str | None]:
    return [(r["body"].get("response_format") or {}).get("type") for r in server.requests
            if r["path"] == "/v1/chat/completions"]  # fmt: skip


def test_openai_wire_sends_the_schema_as_response_format_json_schema(server):
    r = invoke("chat", "--provider", "work", "--schema", SPEC, "name this")
    assert (r.exit_code, r.stdout, r.stderr) == (0, '{"title":"name this","severity":0}\n', "")
    body = server.requests[-1]["body"]
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": SCHEMA}}
    assert not body.get("tools") and body["stream"] is False


def test_a_server_with_only_json_object_is_asked_for_that_said_once(server):
    server.formats = ("json_object",)
    server.script(Answer(content='{"title": "Disk full", "severity": 3}'))
    r = invoke("chat", "--provider", "work", "--schema", SPEC, "triage")
    assert (r.exit_code, r.stdout) == (0, '{"title":"Disk full","severity":3}\n'), r.stderr
    assert r.stderr == FALLBACK
    assert formats(server) == ["json_schema", "json_object"]


def test_a_server_that_cannot_constrain_is_validated_and_retried_said_once(server):
    server.formats = ()
    server.script(Answer(content="The title is Disk full, severity three."),
                  Answer(content='{"title": "Disk full", "severity": 3}'))
    r = invoke("chat", "--provider", "work", "--schema", SPEC, "triage")
    assert (r.exit_code, r.stdout) == (0, '{"title":"Disk full","severity":3}\n'), r.stderr
    assert r.stderr.startswith(FALLBACK + NO_CONSTRAINT)
    assert r.stderr.count("cannot constrain") == 1
    assert formats(server) == ["json_schema", "json_object", None, None]
    assert "prose, not JSON" in server.requests[-1]["body"]["messages"][-1]["content"]


def test_openai_wire_schema_violation_is_exit_6(server):
    server.script(*[Answer(content='{"title": 7}')] * 2)
    r = invoke("chat", "--provider", "work", "--schema", SPEC, "triage")
    assert (r.exit_code, r.stdout) == (6, "")
    assert "localgpt: answer 2: at $: 'severity' is a required property" in r.stderr


TICKETS = ("The disk on the build server is full.", "VPN drops every hour.",
           "Printer on floor 2 jams.", "Password reset mail never arrives.",
           "Laptop fan is very loud.", "Wiki page loads slowly.", "Backup job failed twice.",
           "Cannot join the video call.", "Keyboard is missing a key.",
           "Calendar shows the wrong time zone.")  # fmt: skip


def test_the_in_process_model_validates_ten_times_out_of_ten(isolated_env: Path):
    """SmolLM2-135M, constrained by llama.cpp's grammar from a concise schema: all ten
    answers validate (one process, --each, so the model loads once)."""
    import jsonschema

    pocket(isolated_env)
    spec = SPEC + ", urgent bool"
    r = run("chat", "--provider", "pocket", "--no-rag", "--no-save", "--schema", spec,
            "--each", "Triage this ticket.", input="\n".join(TICKETS) + "\n",
            timeout=TURN_SECONDS * 2)
    assert r.exit_code == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["input_id"] for x in records] == [str(i) for i in range(1, 11)]
    schema = {**SCHEMA, "required": ["title", "severity", "urgent"]}
    for record in records:
        assert record["type"] == "structured", record
        jsonschema.validate(record["value"], schema)
    assert "does not match" not in r.stderr  # no retry was needed


def test_each_says_the_fallback_once_for_the_whole_batch(server):
    server.formats = ()
    server.script(Answer(content='{"title": "a", "severity": 1}'),
                  Answer(content='{"title": "b", "severity": 2}'))
    r = invoke("chat", "--provider", "work", "--schema", SPEC, "--each", "triage",
               input="first\nsecond\n")
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["value"]["title"] for x in r.stdout.splitlines()] == ["a", "b"]
    assert r.stderr == FALLBACK + NO_CONSTRAINT
    assert formats(server) == ["json_schema", "json_object", None, None]  # learned once
