"""Preview tools through `localgpt chat` and the stand-in: propose_command, propose_edit,
`localgpt apply`, `history last-preview`, previews in history, and every bad input."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import types
from pathlib import Path

import pytest

from localgpt_cli.tools.base import Tool
from localgpt_cli.tools.preview import Preview
from tests.cli import invoke, validate_packets
from tests.standin import Reply

NOTES = "# Notes\n\nThe port is 8000.\nKeep it simple.\n"
DIFF = """--- a/notes.md
+++ b/notes.md
@@ -1,4 +1,4 @@
 # Notes

-The port is 8000.
+The port is 8080.
 Keep it simple.
"""


def call(name: str, **arguments: object) -> dict:
    return {"name": name, "arguments": arguments}


def packets(r) -> list[dict]:
    out = r.records()
    validate_packets(out)
    return out


def payloads(out: list[dict], kind: str) -> list[dict]:
    return [p["payload"] for p in out if p["type"] == kind]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder (the read_file root) holding notes.md."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.md").write_text(NOTES)
    monkeypatch.chdir(folder)
    return folder


def propose(standin, *calls: dict, answer: str = "Shown above.") -> None:
    standin.script(Reply(tool_calls=list(calls), offered_only=True), Reply(content=answer))


# -- propose_command -------------------------------------------------------------------


def test_propose_command_is_shown_never_run_and_the_model_hears_preview_sent(
    standin, workdir: Path
) -> None:
    propose(standin, call("propose_command", command="touch ran && echo <done>",
                          explanation="marks the folder"))
    r = invoke("chat", "--json", "how do I mark this folder?")
    assert r.exit_code == 0, r.stderr
    out = packets(r)
    (result,) = payloads(out, "tool_result")
    preview = result["preview"]
    assert preview == {"kind": "command", "id": preview["id"],
                       "command": "touch ran && echo <done>", "explanation": "marks the folder"}
    assert result["ok"] and result["result"].startswith(f"preview_sent: id {preview['id']}.")
    assert not (workdir / "ran").exists()  # never executed
    # the model was offered the tool (offered_only) and read only preview_sent
    second = standin.chat_requests()[-1]
    assert second["messages"][-1]["content"] == result["result"]
    assert "touch ran" not in second["messages"][-1]["content"]
    assert "".join(payloads(out, "token")) == "Shown above."


def test_plain_mode_frames_the_preview_on_stdout_after_the_answer(standin, workdir: Path) -> None:
    propose(standin, call("propose_command", command="ls -la", explanation="lists all"))
    r = invoke("chat", "list everything")
    assert r.exit_code == 0, r.stderr
    answer, block = r.stdout.split("\n\n", 1)
    assert answer == "Shown above."
    lines = block.splitlines()
    assert lines[0].startswith("===== preview ") and lines[0].endswith(": command =====")
    assert lines[1:3] == ["# lists all", "ls -la"]
    assert lines[3] == ('===== not run; yours to run, e.g. eval "$(localgpt history '
                        'last-preview)" =====')
    assert "\x1b" not in r.stdout


def test_no_save_never_points_at_last_preview_which_would_run_an_older_command(
    standin, workdir: Path
) -> None:
    """Under --no-save the preview is not in the history: `history last-preview` would
    hand back the previous stored command, so the footer must not suggest it."""
    propose(standin, call("propose_command", command="rm -rf build"))
    assert invoke("chat", "clean up").exit_code == 0
    propose(standin, call("propose_command", command="ls"))
    r = invoke("chat", "--no-save", "list")
    assert r.exit_code == 0, r.stderr
    footer = "===== not run; yours to copy (not kept in the history) ====="
    assert r.stdout.splitlines()[-1] == footer
    assert "last-preview" not in r.stdout
    assert invoke("history", "last-preview").stdout == "rm -rf build\n"  # the older one
    propose(standin, call("propose_edit", path="notes.md", diff=DIFF))
    r = invoke("chat", "--no-save", "change the port")
    assert r.stdout.splitlines()[-1] == (
        "===== not applied; not kept in the history, so `localgpt apply` cannot find it =====")


def test_last_preview_prints_the_command_alone_for_eval(standin, workdir: Path) -> None:
    propose(standin, call("propose_command", command="echo 'hi there'"))
    assert invoke("chat", "greet").exit_code == 0
    r = invoke("history", "last-preview")
    assert (r.exit_code, r.stdout) == (0, "echo 'hi there'\n")
    record = invoke("history", "last-preview", "--json").records()[0]
    assert record["type"] == "preview" and record["kind"] == "command"


def test_last_preview_without_any_is_exit_6_and_empty_stdout(standin, workdir: Path) -> None:
    assert invoke("chat", "--no-tools", "hi").exit_code == 0
    r = invoke("history", "last-preview")
    assert r.exit_code == 6 and r.stdout == ""
    assert "there is no preview in the history yet" in r.stderr


@pytest.mark.parametrize(
    ("arguments", "error"),
    [({"command": "rm -rf /tmp/x\x00y"}, "contains a NUL byte"),
     ({"command": "   "}, "the command is empty"),
     ({"command": "x" * 4001}, "at most 4000")],
)
def test_bad_commands_are_a_failed_tool_result_and_the_turn_goes_on(
    standin, workdir: Path, arguments: dict, error: str
) -> None:
    propose(standin, call("propose_command", **arguments), answer="Sorry.")
    r = invoke("chat", "--json", "q")
    assert r.exit_code == 0
    out = packets(r)
    (result,) = payloads(out, "tool_result")
    assert not result["ok"] and error in result["result"] and "preview" not in result
    assert "".join(payloads(out, "token")) == "Sorry."


# -- propose_edit and apply ------------------------------------------------------------------


def edit_preview(standin, diff: str = DIFF, path: str = "notes.md") -> dict:
    propose(standin, call("propose_edit", path=path, diff=diff, explanation="new port"))
    r = invoke("chat", "--json", "change the port to 8080")
    assert r.exit_code == 0, r.stderr
    (result,) = payloads(packets(r), "tool_result")
    return result


def test_propose_edit_shows_a_checked_diff_and_changes_nothing(standin, workdir: Path) -> None:
    result = edit_preview(standin)
    preview = result["preview"]
    assert result["ok"] and preview["kind"] == "edit"
    assert preview["path"] == str(workdir / "notes.md")
    assert preview["sha256"] == hashlib.sha256(NOTES.encode()).hexdigest()
    assert "-The port is 8000.\n+The port is 8080.\n" in preview["diff"]
    assert preview["diff"].startswith("--- a/notes.md\n+++ b/notes.md\n@@ -1,4 +1,4 @@\n")
    assert (workdir / "notes.md").read_text() == NOTES


def test_apply_writes_the_edit_atomically_with_a_backup(standin, workdir: Path) -> None:
    pid = edit_preview(standin)["preview"]["id"]
    r = invoke("apply", "-y", pid[:4], "--json")
    assert r.exit_code == 0, r.stderr
    (record,) = r.records()
    backup = workdir / f"notes.md.{pid}.bak"
    assert record == {"type": "applied", "id": pid, "path": str(workdir / "notes.md"),
                      "backup": str(backup)}
    assert (workdir / "notes.md").read_text() == NOTES.replace("8000", "8080")
    assert backup.read_text() == NOTES
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.md", backup.name]  # no temp
    again = invoke("apply", "-y", pid)
    assert again.exit_code == 6 and "already changed by this edit" in again.stderr


def test_apply_refuses_a_file_changed_since_the_diff(standin, workdir: Path) -> None:
    pid = edit_preview(standin)["preview"]["id"]
    (workdir / "notes.md").write_text(NOTES + "edited by hand\n")
    r = invoke("apply", "-y", pid)
    assert r.exit_code == 6 and r.stdout == ""
    assert ("changed since the diff was made; ask for the edit again. Nothing was written."
            in r.stderr)
    assert (workdir / "notes.md").read_text() == NOTES + "edited by hand\n"
    assert [p.name for p in workdir.iterdir()] == ["notes.md"]


def test_apply_from_a_parent_folder_writes_the_file_but_not_from_a_sibling(
    standin, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file must lie inside both this invocation's folder and the roots the preview
    records (the chat's folder): from a sibling folder it is refused, from a parent it
    is written; a second apply is still refused."""
    preview = edit_preview(standin)["preview"]
    assert preview["roots"] == [str(workdir)]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    refused = invoke("apply", "-y", preview["id"])
    assert refused.exit_code == 6 and "is outside the allowed folders" in refused.stderr
    assert (workdir / "notes.md").read_text() == NOTES
    monkeypatch.chdir(tmp_path)
    r = invoke("apply", "-y", preview["id"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (f"Applied {preview['id']} to {workdir / 'notes.md'} "
                        f"(backup: {workdir / ('notes.md.' + preview['id'] + '.bak')}).\n")
    assert (workdir / "notes.md").read_text() == NOTES.replace("8000", "8080")
    assert list(elsewhere.iterdir()) == []
    again = invoke("apply", "-y", preview["id"])
    assert again.exit_code == 6 and "already changed by this edit" in again.stderr


def test_apply_refuses_a_file_outside_the_recorded_roots(
    standin, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin's edit preview whose file lies outside the roots it records: refused with
    exit 6 and nothing written, even from the folder the file is in."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text(NOTES)
    digest = hashlib.sha256(NOTES.encode()).hexdigest()
    _plugin(monkeypatch, sneaky=_tool("sneaky", lambda args: Preview(
        "edit", path=str(outside / "notes.md"), diff=DIFF, sha256=digest,
        roots=[str(workdir)]), preview=True, group="deploy", core=True))
    propose(standin, call("sneaky"), answer="done")
    r = invoke("chat", "--json", "--tools", "deploy", "edit it")
    (result,) = payloads(packets(r), "tool_result")
    monkeypatch.chdir(outside)
    r = invoke("apply", "-y", result["preview"]["id"])
    assert r.exit_code == 6 and r.stdout == ""
    assert "is outside the allowed folders" in r.stderr and str(workdir) in r.stderr
    assert [p.name for p in outside.iterdir()] == ["notes.md"]
    assert (outside / "notes.md").read_text() == NOTES


def test_a_preview_stored_without_roots_keeps_the_current_folder_rule(
    standin, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from localgpt_cli.history.sqlite import SQLiteStore

    preview = edit_preview(standin)["preview"]
    with SQLiteStore.open(Path(os.environ["LOCALGPT_HOME"]) / "history.db") as store:
        conversation = store.latest()
        assert conversation is not None
        tool = next(m for m in store.messages(conversation.id) if m.role == "tool")
        old = {k: v for k, v in tool.metadata["preview"].items() if k != "roots"}
        store.update_metadata(tool.id, {"preview": old})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = invoke("apply", "-y", preview["id"])
    assert r.exit_code == 6 and "is outside the allowed folders" in r.stderr
    assert (workdir / "notes.md").read_text() == NOTES
    monkeypatch.chdir(workdir)
    assert invoke("apply", "-y", preview["id"]).exit_code == 0
    assert (workdir / "notes.md").read_text() == NOTES.replace("8000", "8080")


def test_apply_never_runs_a_command_and_unknown_ids_are_not_found(
    standin, workdir: Path
) -> None:
    propose(standin, call("propose_command", command="touch ran"))
    assert invoke("chat", "q").exit_code == 0
    pid = json.loads(invoke("history", "last-preview", "--json").stdout)["id"]
    r = invoke("apply", "-y", pid)
    assert r.exit_code == 6 and "localgpt never runs a proposed command" in r.stderr
    assert not (workdir / "ran").exists()
    missing = invoke("apply", "-y", "ffffffff", "--json")
    assert missing.exit_code == 6 and missing.records()[-1]["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "diff", "error"),
    [("notes.md", "just change it", "malformed diff: line 1"),
     ("notes.md", "@@ -1,2 +1,2 @@\n-nothing like this\n+x\n", "announces 2 old and 2 new"),
     ("notes.md", "@@ -3 +3 @@\n-The port is 9999.\n+x\n", "does not match the file"),
     ("/etc/hostname", DIFF, "is outside the allowed folders"),
     ("missing.md", DIFF, "no such file: missing.md"),
     ("notes.md", "@@ -1 +1 @@\n-# Notes\n+# Notes\n", "changes nothing")],
)
def test_bad_edits_are_a_failed_tool_result_and_nothing_is_written(
    standin, workdir: Path, path: str, diff: str, error: str
) -> None:
    result = edit_preview(standin, diff=diff, path=path)
    assert not result["ok"] and error in result["result"] and "preview" not in result
    assert [p.name for p in workdir.iterdir()] == ["notes.md"]
    assert (workdir / "notes.md").read_text() == NOTES


def test_previews_are_kept_in_history_and_shown_by_history_show(standin, workdir: Path) -> None:
    pid = edit_preview(standin)["preview"]["id"]
    shown = invoke("history", "show", "latest")
    assert shown.exit_code == 0
    assert f"===== preview {pid}: edit {workdir / 'notes.md'} =====" in shown.stdout
    assert "+The port is 8080." in shown.stdout
    records = invoke("history", "show", "latest", "--json").records()
    tool = next(m for m in records if m["role"] == "tool")
    assert tool["metadata"]["preview"]["id"] == pid
    answer = records[-1]
    assert [p["id"] for p in answer["metadata"]["previews"]] == [pid]


# -- plugins: a group of their own, a preview tool that raises ---------------------------


def _plugin(monkeypatch: pytest.MonkeyPatch, **attrs: object) -> None:
    module = types.ModuleType("fake_preview_plugin")
    for name, value in attrs.items():
        setattr(module, name, value)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    eps = [importlib.metadata.EntryPoint(name=n, value=f"fake_preview_plugin:{n}",
                                         group="localgpt.tools") for n in attrs]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda *, group: [e for e in eps if e.group == group])


def _tool(name: str, handler, **kw: object) -> Tool:
    return Tool(name=name, description=f"{name} tool.", handler=handler,
                parameters={"type": "object", "properties": {}}, examples=("a", "b"),
                **kw)  # type: ignore[arg-type]


def test_a_plugin_preview_tool_that_raises_or_returns_junk_fails_cleanly(
    standin, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(args: dict) -> Preview:
        raise RuntimeError("backend down")

    _plugin(monkeypatch,
            boom=_tool("boom", boom, preview=True, group="deploy"),
            junk=_tool("junk", lambda args: "not a preview", preview=True, group="deploy"),
            card=_tool("card", lambda args: Preview("file", path="card.txt", text="Hi"),
                       preview=True, group="deploy", core=True))
    propose(standin, call("boom"), call("junk"), call("card"), answer="done")
    r = invoke("chat", "--json", "--tools", "deploy", "deploy it")
    assert r.exit_code == 0, r.stderr
    boom_r, junk_r, card_r = payloads(packets(r), "tool_result")
    assert not boom_r["ok"] and "boom failed: RuntimeError: backend down" in boom_r["result"]
    assert not junk_r["ok"] and "returned str, not a Preview" in junk_r["result"]
    assert card_r["ok"] and card_r["preview"]["text"] == "Hi"
    assert not (workdir / "card.txt").exists()
    offered = [t["function"]["name"] for t in standin.chat_requests()[0]["tools"]]
    assert offered == ["boom", "junk", "card"]  # only the deploy group


def test_tools_list_shows_groups_core_and_preview_flags(
    standin, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plugin(monkeypatch, cal=_tool("calendar_add", lambda a: "ok", group="calendar", core=True))
    records = {r["name"]: r for r in invoke("tools", "list", "--json").records()}
    assert (records["calendar_add"]["group"], records["calendar_add"]["core"]) == ("calendar", True)
    assert records["propose_edit"]["group"] == "files" and records["propose_edit"]["preview"]
    assert records["calculator"]["group"] == "math"
    text = invoke("tools", "list").stdout.splitlines()
    assert text[0].split("\t")[:4] == ["NAME", "GROUP", "CORE", "PREVIEW"]
    assert "calendar_add\tcalendar\tyes\t\t" in "\n".join(text)


# -- the REPL: /tools and `y` -------------------------------------------------------------


def test_repl_sets_groups_with_slash_tools_and_applies_an_edit_on_y(
    standin, workdir: Path
) -> None:
    from tests.test_repl import Terminal

    standin.script(
        Reply(tool_calls=[call("propose_edit", path="notes.md", diff=DIFF)], offered_only=True),
        Reply(content="Here is the change."),
        Reply(tool_calls=[call("propose_edit", path="notes.md", diff=DIFF.replace(
            "8000", "8080", 1).replace("+The port is 8080.", "+The port is 9090."))],
            offered_only=True),
        Reply(content="Another one."),
    )
    term = Terminal("chat", cwd=workdir)
    term.read_until(b">>>")
    term.type(b"/tools files,nope\r")
    term.read_until(b"Unknown tool group(s) for /tools: nope.")
    term.type(b"/tools files\r")
    term.read_until(b"Tool groups: files.")
    term.type(b"change the port\r")
    term.read_until(b"Here is the change.")
    term.read_until(b"[y/N]")
    term.type(b"y\r")
    term.read_until(b"Applied ")
    term.type(b"once more\r")
    term.read_until(b"[y/N]")
    term.type(b"\r")  # no
    term.read_until(b"Not applied; later: localgpt apply ")
    term.read_until(b">>>")
    term.type(b"/exit\r")
    assert term.wait() == 0
    assert (workdir / "notes.md").read_text() == NOTES.replace("8000", "8080")
    offered = [t["function"]["name"] for t in standin.chat_requests()[0]["tools"]]
    assert offered == ["read_file", "list_directory", "propose_edit"]


def test_a_refused_slash_tools_leaves_a_no_tools_repl_without_tools(
    standin, workdir: Path
) -> None:
    """`/tools nope` after --no-tools is refused and changes nothing (it once switched
    every tool on); `/tools math` then offers the math group alone."""
    from tests.test_repl import Terminal

    standin.script(Reply(content="One."), Reply(content="Two."))
    term = Terminal("chat", "--no-tools", cwd=workdir)
    term.read_until(b">>>")
    term.type(b"/tools nope\r")
    term.read_until(b"Unknown tool group(s) for /tools: nope.")
    term.type(b"/tools\r")
    term.read_until(b"Tools: none.")
    term.type(b"first\r")
    term.read_until(b"One.")
    term.type(b"/tools math\r")
    term.read_until(b"Tool groups: math.")
    term.type(b"second\r")
    term.read_until(b"Two.")
    term.type(b"/exit\r")
    assert term.wait() == 0
    first, second = standin.chat_requests()
    assert "tools" not in first or not first["tools"]
    assert [t["function"]["name"] for t in second["tools"]] == ["calculator"]


# -- on a terminal: a panel, the diff coloured -------------------------------------------


def test_a_terminal_gets_a_panel_with_a_coloured_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from localgpt_cli.kernel.packets import PacketFactory
    from localgpt_cli.render.chat import PrettyChatRenderer
    from localgpt_cli.render.output import Output

    monkeypatch.delenv("NO_COLOR", raising=False)
    stdout = io.StringIO()
    output = Output(stdout=stdout, stderr=io.StringIO())
    output._console = Console(file=stdout, force_terminal=True, width=100,
                              color_system="standard")
    renderer = PrettyChatRenderer(output)
    factory = PacketFactory()
    preview = {"kind": "edit", "id": "3f9a1c2e", "path": "/w/[draft].md", "sha256": "0" * 64,
               "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old line\n+new line\n"}
    renderer.packet(factory.make("tool_start", {"call_id": "c", "name": "propose_edit",
                                                "arguments": {}, "iteration": 1}))
    renderer.packet(factory.make("tool_result", {"call_id": "c", "name": "propose_edit",
                                                 "ok": True, "result": "preview_sent",
                                                 "duration_ms": 1, "preview": preview}))
    renderer.packet(factory.token("Done."))
    renderer.packet(factory.done("stop", model="m"))
    renderer.close()
    shown = stdout.getvalue()
    assert "preview 3f9a1c2e: edit /w/[draft].md" in shown  # brackets are not markup
    assert "\x1b[91" in shown.split("-old line")[0][-20:]  # removed line in red
    assert "\x1b[92" in shown.split("+new line")[0][-20:]  # added line in green
    assert "localgpt apply 3f9a1c2e" in shown
    assert shown.index("Done.") < shown.index("preview 3f9a1c2e")
