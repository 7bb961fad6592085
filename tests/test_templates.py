"""Templates (issue 28): `chat --save NAME`, `chat -t NAME [-P name value]`, the command
line over the template, `localgpt templates list|show|path|edit`, and the one-line errors
(exit 2 for a flag, 6 for a file, naming the file and line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke

SUMMARY = '''system = "Answer in $lang."
prompt = "Summarise for $who:\\n\\n$input"
model = "qwen3"

[options]
temperature = 0.2

[defaults]
lang = "English"
'''


def folder(isolated_env: Path) -> Path:
    return isolated_env / "config" / "localgpt" / "templates"


@pytest.fixture
def summary(isolated_env: Path) -> Path:
    path = folder(isolated_env) / "summary.toml"
    path.parent.mkdir(parents=True)
    path.write_text(SUMMARY)
    return path


def test_save_then_use_a_template_with_stdin_as_input(standin, isolated_env: Path):
    r = invoke("chat", "--save", "triage", "-s", "You triage tickets.", "--schema",
               "title, severity int", "-o", "temperature", "0", "Triage: $input")
    assert (r.exit_code, r.stdout) == (0, ""), r.stderr
    assert not standin.chat_requests()  # saved, not asked
    path = folder(isolated_env) / "triage.toml"
    assert r.stderr == f"Saved template 'triage' to {path}.\n"
    assert invoke("templates", "list").stdout == "triage\n"
    assert invoke("templates", "path", "triage").stdout == f"{path}\n"
    assert 'schema = "title, severity int"' in invoke("templates", "show", "triage").stdout
    r = invoke("chat", "-t", "triage", input="The disk is full.\n")
    assert (r.exit_code, r.stdout) == (0, '{"title":"Triage: The disk is full.","severity":0}\n'
                                       ), r.stderr  # fmt: skip
    body = standin.chat_requests()[-1]
    assert body["options"]["temperature"] == 0 and body["format"]["required"] == [
        "title", "severity"]
    assert {"role": "system", "content": "You triage tickets."} in body["messages"]
    assert body["messages"][-1]["content"] == "Triage: The disk is full."


def test_parameters_defaults_and_the_command_line_over_the_template(standin, summary):
    r = invoke("chat", "-t", "summary", "-P", "who", "the board", "the notes")
    assert r.exit_code == 0, r.stderr
    body = standin.chat_requests()[-1]
    assert body["model"].startswith("qwen3") and body["options"]["temperature"] == 0.2
    assert body["messages"][0] == {"role": "system", "content": "Answer in English."}
    assert body["messages"][-1]["content"] == "Summarise for the board:\n\nthe notes"
    r = invoke("chat", "-t", "summary", "-P", "who", "Bo", "-P", "lang", "French",
               "-m", "llama3.2", "-o", "temperature", "0.7", "-s", "Be brief.", "x")
    assert r.exit_code == 0, r.stderr
    body = standin.chat_requests()[-1]
    assert body["model"].startswith("llama3.2") and body["options"]["temperature"] == 0.7
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_save_refuses_schema_multi_which_a_template_cannot_keep(standin, isolated_env: Path):
    r = invoke("chat", "--save", "people", "--schema-multi", "name, role", "list them")
    assert r.exit_code == 2 and "--save keeps --schema, not --schema-multi" in r.stderr
    assert not (isolated_env / "config" / "localgpt" / "templates" / "people.toml").exists()


def test_flag_errors_are_exit_2_naming_the_file(standin, summary, isolated_env: Path):
    missing = folder(isolated_env) / "nope.toml"
    cases = [
        (("-t", "nope", "x"), f"Template 'nope' does not exist ({missing}). Templates: "
                              "summary. Save one with chat --save nope …"),
        (("-t", "summary", "x"), f"Template 'summary' needs $who ({summary}). Give it with "
                                 "-P who VALUE."),
        (("-t", "summary", "-P", "who", "a", "-P", "tone", "dry", "x"),
         f"-P tone: template 'summary' has no parameter $tone ({summary}). Its parameters: "
         "lang, who."),
    ]
    for args, message in cases:
        r = invoke("chat", *args)
        assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"localgpt: error: {message}\n")
    assert not standin.chat_requests()


def test_file_errors_are_exit_6_naming_the_file_and_line(standin, summary):
    summary.write_text('system = "ok"\nprompt = "unterminated\n')
    r = invoke("chat", "-t", "summary", "x")
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr.startswith(f"localgpt: error: {summary}:2: the template is not valid TOML")
    assert len(r.stderr.splitlines()) == 1
    summary.write_text('system = "ok"\n\ntemperature = 3\n')
    r = invoke("templates", "show", "summary")
    assert (r.exit_code, r.stdout) == (6, "")
    assert r.stderr.startswith(f"localgpt: error: {summary}:3: unknown key 'temperature'.")
    assert not standin.chat_requests()


def test_edit_opens_the_editor_on_a_new_template_and_checks_it(isolated_env, monkeypatch):
    monkeypatch.setenv("EDITOR", "sed -i s/English/German/")
    r = invoke("templates", "edit", "fresh")
    assert r.exit_code == 0, r.stderr
    assert 'lang = "German"' in (folder(isolated_env) / "fresh.toml").read_text()
    monkeypatch.setenv("EDITOR", "sed -i s/system/sistem/")
    r = invoke("templates", "edit", "fresh")
    assert r.exit_code == 6 and "fresh.toml:2: unknown key 'sistem'" in r.stderr


def test_each_fills_the_templates_input_once_per_line(standin, summary):
    r = invoke("chat", "-t", "summary", "-P", "who", "ops", "--schema", "gist", "--each",
               input="disk full\nvpn down\n")
    assert r.exit_code == 0, r.stderr
    asked = [b["messages"][-1]["content"] for b in standin.chat_requests()]
    assert asked == ["Summarise for ops:\n\ndisk full", "Summarise for ops:\n\nvpn down"]
    assert len(r.stdout.splitlines()) == 2
    r = invoke("chat", "-t", "summary", "--schema", "gist", "--each", input="a\nb\n")
    assert (r.exit_code, r.stdout) == (2, "") and "needs $who" in r.stderr
