"""Tool groups on the command line: `chat --tools GROUPS|all|none`, `--no-tools`, the
`tools.groups` setting, and `done.selection` saying how the offered tools were chosen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli import invoke, validate_packets
from tests.standin import Reply


def offered(standin) -> list[str]:
    return [t["function"]["name"] for t in standin.chat_requests()[-1].get("tools") or []]


def done_of(r) -> dict:
    packets = r.records()
    validate_packets(packets)
    return packets[-1]["payload"]


def test_tools_groups_filter_what_is_offered_and_done_says_so(standin) -> None:
    r = invoke("chat", "--json", "--tools", "files,math", "hi")
    assert r.exit_code == 0, r.stderr
    assert offered(standin) == ["calculator", "read_file", "list_directory", "propose_edit"]
    assert done_of(r)["selection"] == {
        "method": "context_filtered", "reason": "4 tools, within the limit of 12",
        "groups": ["files", "math"], "offered": offered(standin)}


def test_a_tool_outside_the_allowed_groups_may_not_run(standin) -> None:
    standin.script(Reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "1+1"}}]),
                   Reply(content="ok"))
    r = invoke("chat", "--json", "--tools", "shell", "hi")
    results = [p["payload"] for p in r.records() if p["type"] == "tool_result"]
    assert not results[0]["ok"] and "no tool named 'calculator'" in results[0]["result"]
    assert "Available tools: propose_command." in results[0]["result"]


@pytest.mark.parametrize("flags", [("--tools", "none"), ("--no-tools",), ("--tools", "NONE")])
def test_tools_none_turns_tools_off(standin, flags: tuple[str, ...]) -> None:
    r = invoke("chat", "--json", *flags, "hi")
    assert r.exit_code == 0, r.stderr
    assert offered(standin) == [] and "selection" not in done_of(r)


def test_tools_all_is_the_default(standin) -> None:
    r = invoke("chat", "--json", "--tools", "all", "hi")
    assert done_of(r)["selection"]["method"] == "all"
    assert "propose_command" in offered(standin)


@pytest.mark.parametrize(
    ("value", "message"),
    [("files,nope", "Unknown tool group(s) for --tools: nope."),
     ("files,,Bad Name", "is not a list of tool groups"),
     (",", "is not a list of tool groups")],
)
def test_a_bad_group_is_a_usage_error_before_anything_is_sent(
    standin, value: str, message: str
) -> None:
    r = invoke("chat", "--tools", value, "hi")
    assert r.exit_code == 2 and message in r.stderr
    assert standin.chat_requests() == []
    assert "Traceback" not in r.stderr


def test_the_config_file_and_the_environment_set_the_groups(
    standin, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[tools]\ngroups = ["shell"]\n')
    assert invoke("chat", "hi").exit_code == 0
    assert offered(standin) == ["propose_command"]
    settings = {r["key"]: r for r in invoke("config", "--json").records() if r["type"] == "setting"}
    assert settings["tools.groups"]["value"] == "shell"
    monkeypatch.setenv("LOCALGPT_TOOLS", "math")
    assert invoke("chat", "hi").exit_code == 0
    assert offered(standin) == ["calculator"]
    assert invoke("chat", "--tools", "files", "hi").exit_code == 0  # the flag wins
    assert offered(standin) == ["read_file", "list_directory", "propose_edit"]


@pytest.mark.parametrize(
    ("toml", "message"),
    [('[tools]\ngroups = 5\n', "must be a list of group names"),
     ('[tools]\nonly = ["x"]\n', "must be a table with only `groups`"),
     ('tools = "x"\n', "must be a table with only `groups`")],
)
def test_a_bad_tools_table_is_refused_with_exit_6(standin, toml: str, message: str) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(toml)
    r = invoke("chat", "hi")
    assert r.exit_code == 6 and message in r.stderr


def test_an_unknown_group_from_the_environment_names_the_variable(
    standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCALGPT_TOOLS", "files,typo")
    r = invoke("chat", "hi")
    assert r.exit_code == 6
    assert "Unknown tool group(s) for LOCALGPT_TOOLS: typo." in r.stderr
    assert standin.chat_requests() == []
