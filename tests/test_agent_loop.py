"""The agent loop through `localgpt chat`: tool calls, failures fed back, guards,
strategies for models without tools, history replay, tool selection."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import invoke, run, run_in_pty, validate_packets
from tests.standin import Reply


def calc(expr: str) -> dict:
    return {"name": "calculator", "arguments": {"expression": expr}}


def packets_of(r):
    packets = r.records()
    validate_packets(packets)
    return packets


def by_type(packets, kind):
    return [p["payload"] for p in packets if p["type"] == kind]


def test_calculate_5_plus_5_runs_the_tool_and_answers_with_it(standin):
    standin.script(Reply(tool_calls=[calc("5 + 5")]), Reply(content="5 + 5 is 10."))
    r = invoke("chat", "--json", "calculate 5 + 5")
    assert r.exit_code == 0, r.stderr
    packets = packets_of(r)
    (start,) = by_type(packets, "tool_start")
    (result,) = by_type(packets, "tool_result")
    assert start["name"] == "calculator" and start["arguments"] == {"expression": "5 + 5"}
    assert start["iteration"] == 1
    assert result == {"call_id": start["call_id"], "name": "calculator", "ok": True,
                      "result": "10", "duration_ms": result["duration_ms"]}
    assert "".join(by_type(packets, "token")) == "5 + 5 is 10."
    done = packets[-1]["payload"]
    assert done["iterations"] == 2 and done["reason"] == "stop"
    assert "calculator" in done["used_tools"]
    first, second = standin.chat_requests()
    assert "calculator" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert second["messages"][-1] == {"role": "tool", "content": "10", "tool_name": "calculator"}


def test_plain_mode_shows_a_dim_trace_line_on_stderr(standin):
    standin.script(Reply(tool_calls=[calc("5+5")]), Reply(content="10"))
    r = invoke("chat", "calculate 5 + 5")
    assert r.stdout == "10\n"
    assert 'calculator(expression="5+5") -> 10' in r.stderr


def test_reading_etc_passwd_is_refused_inside_the_loop(standin):
    standin.script(
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "/etc/passwd"}}]),
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "../../x"}}]),
        Reply(content="I may not read that."),
    )
    r = invoke("chat", "--json", "show me /etc/passwd")
    assert r.exit_code == 0
    results = by_type(packets_of(r), "tool_result")
    assert [x["ok"] for x in results] == [False, False]
    assert "root:" not in results[0]["result"]
    assert "/etc/passwd is outside the allowed folders" in results[0]["result"]
    assert "".join(by_type(packets_of(r), "token")) == "I may not read that."


def test_unknown_tool_and_bad_arguments_are_fed_back(standin):
    standin.script(
        Reply(tool_calls=[{"name": "teleport", "arguments": {}}]),
        Reply(tool_calls=[{"name": "calculator", "arguments": {"expression": 5}}]),
        Reply(content="giving up"),
    )
    r = invoke("chat", "--json", "q")
    unknown, bad = by_type(packets_of(r), "tool_result")
    assert not unknown["ok"] and "no tool named 'teleport'" in unknown["result"]
    assert "calculator" in unknown["result"]
    assert not bad["ok"] and "expression" in bad["result"]
    sent = standin.chat_requests()[-1]["messages"]
    assert sent[-1]["role"] == "tool" and sent[-1]["content"] == bad["result"]


def test_a_tool_that_raises_does_not_end_the_turn(standin, tmp_path):
    plugin = tmp_path / "mytools.py"
    plugin.write_text(textwrap.dedent('''
        def explode(reason: str) -> str:
            """Always fails."""
            raise RuntimeError("boom: " + reason)
    '''))
    standin.script(Reply(tool_calls=[{"name": "explode", "arguments": {"reason": "test"}}]),
                   Reply(content="it failed"))
    r = invoke("chat", "--json", "--functions", str(plugin), "q")
    assert r.exit_code == 0
    (result,) = by_type(packets_of(r), "tool_result")
    assert not result["ok"] and "boom: test" in result["result"]


def test_several_calls_in_one_response_run_in_order(standin):
    standin.script(Reply(tool_calls=[calc("1+1"), calc("2*3")]), Reply(content="2 and 6"))
    r = invoke("chat", "--json", "q")
    assert [x["result"] for x in by_type(packets_of(r), "tool_result")] == ["2", "6"]
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["2", "6"]


def test_tool_calls_on_the_done_chunk_are_collected(standin):
    standin.script(Reply(tool_calls=[calc("7*6")], tool_calls_on_done=True), Reply(content="42"))
    r = invoke("chat", "--json", "q")
    assert by_type(packets_of(r), "tool_result")[0]["result"] == "42"


def stored_answer(done: dict) -> str:
    with SQLiteStore.open(Path(os.environ["LOCALGPT_HOME"]) / "history.db") as store:
        message = store.get_message(done["message_id"])
    assert message.metadata["done_reason"] == done["reason"]
    assert message.metadata["used_tools"] == done["used_tools"]
    return message.content


def test_iteration_cap_ends_with_max_iterations_and_says_so(standin):
    standin.script(*[Reply(tool_calls=[calc(f"{i}+1")]) for i in range(5)])
    r = invoke("chat", "--json", "--max-iterations", "2", "q")
    assert r.exit_code == 0
    packets = packets_of(r)
    done = packets[-1]["payload"]
    assert done["reason"] == "max_iterations" and done["iterations"] == 2
    answer = "".join(by_type(packets, "token"))
    assert answer == (
        "Stopped without an answer: the model was still calling tools (last calculator) "
        "after 2 model calls; --max-iterations allows more."
    )
    assert stored_answer(done) == answer
    assert done["used_tools"] == ["calculator"]
    assert r.stderr == ""


def test_the_same_call_three_times_stops_the_loop_and_says_which_tool(standin):
    standin.script(*[Reply(tool_calls=[calc("1+1")]) for _ in range(5)])
    r = invoke("chat", "--json", "q")
    assert r.exit_code == 0
    packets = packets_of(r)
    assert len(by_type(packets, "tool_result")) == 3
    done = packets[-1]["payload"]
    assert done["reason"] == "loop_guard"
    answer = "".join(by_type(packets, "token"))
    assert answer == (
        "Stopped without an answer: the model called calculator with the same arguments "
        "3 times in a row."
    )
    assert stored_answer(done) == answer
    assert r.stderr == ""


def test_the_loop_guard_answer_is_what_a_pipe_reads(standin):
    standin.script(Reply(content="Let me see.", tool_calls=[calc("1+1")]),
                   *[Reply(tool_calls=[calc("1+1")]) for _ in range(4)])
    r = invoke("chat", "q")
    assert r.exit_code == 0
    sentence = ("Stopped without an answer: the model called calculator with the same "
                "arguments 3 times in a row.")
    assert r.stdout == f"Let me see.\n\n{sentence}\n"
    with SQLiteStore.open(Path(os.environ["LOCALGPT_HOME"]) / "history.db") as store:
        (conversation,) = store.list_conversations()
        stored = store.messages(conversation.id)
    assert stored[1].content == "Let me see." and stored[1].tool_calls
    assert stored[-1].content == sentence


def test_used_tools_are_the_tools_called_not_those_offered(standin):
    standin.script(
        Reply(tool_calls=[calc("1+1"), {"name": "teleport", "arguments": {}},
                          {"name": "list_directory", "arguments": {"path": "/nope"}}]),
        Reply(tool_calls=[calc("2+2")]),
        Reply(content="done"),
    )
    r = invoke("chat", "--json", "q")
    done = packets_of(r)[-1]["payload"]
    offered = [t["function"]["name"] for t in standin.chat_requests()[0]["tools"]]
    assert "read_file" in offered
    # a tool that ran, also when it failed, counts once; a name that is no tool does not
    assert done["used_tools"] == ["calculator", "list_directory"]
    assert stored_answer(done) == "done"
    standin.script(Reply(content="no tools needed"))
    assert packets_of(invoke("chat", "--json", "hi"))[-1]["payload"]["used_tools"] == []


def test_model_without_tools_still_answers_and_says_so_once(standin):
    standin.script(Reply(content="no tools here"), model="gemma2")
    r = invoke("chat", "-m", "gemma2", "calculate 5 + 5")
    assert r.exit_code == 0 and r.stdout == "no tools here\n"
    assert r.stderr.count("cannot call tools") == 1
    assert standin.chat_requests()[-1]["tools"] == []


def test_server_refusing_tools_is_retried_once_without(standin):
    standin.script(
        Reply(http_status=400, http_error="registry.ollama.ai/library/llama3.2:latest "
              "does not support tools"),
        Reply(content="answered anyway"),
    )
    r = invoke("chat", "q")
    assert r.exit_code == 0 and r.stdout == "answered anyway\n"
    first, second = standin.chat_requests()
    assert first["tools"] and second["tools"] == []


def test_no_tools_and_only_tool_flags(standin):
    invoke("chat", "--no-tools", "q")
    assert standin.chat_requests()[-1]["tools"] == []
    invoke("chat", "-T", "calculator", "q")
    assert [t["function"]["name"] for t in standin.chat_requests()[-1]["tools"]] == ["calculator"]
    r = invoke("chat", "-T", "nope", "q")
    assert r.exit_code == 2 and "nope" in r.stderr


def test_tool_steps_are_stored_and_replayed_by_continue(standin):
    standin.script(Reply(tool_calls=[calc("5+5")]), Reply(content="10"), Reply(content="20"))
    assert run("chat", "calculate 5 + 5").exit_code == 0
    assert run("chat", "-c", "double it").stdout == "20\n"
    sent = standin.chat_requests()[-1]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == {"expression": "5+5"}
    assert sent[2] == {"role": "tool", "content": "10", "tool_name": "calculator"}


def test_many_tools_are_narrowed_by_semantic_selection(standin, tmp_path):
    functions = [
        f'def {name}(text: str) -> str:\n    """{desc}"""\n    return text\n'
        for name, desc in [(f"tool_{i}", f"Does unrelated thing number {i} with gadgets.")
                           for i in range(14)]
    ]
    functions.append('def convert_currency(amount: float) -> str:\n'
                     '    """Convert an amount of money between currencies, euro dollar."""\n'
                     '    return str(amount)\n')
    plugin = tmp_path / "many.py"
    plugin.write_text("\n\n".join(functions))
    r = invoke("chat", "--json", "--functions", str(plugin), "convert 20 euro to dollar money")
    assert r.exit_code == 0, r.stderr
    offered = [t["function"]["name"] for t in standin.chat_requests()[-1]["tools"]]
    assert "convert_currency" in offered
    assert {"calculator", "read_file", "list_directory", "propose_command"} <= set(offered)
    assert len(offered) == 4 + 6
    assert standin.embed_calls >= 1
    done = [json.loads(line) for line in r.stdout.splitlines()][-1]["payload"]
    assert done["selection"] == {"method": "semantic", "reason": None, "groups": None,
                                 "offered": offered}


def test_selection_falls_back_to_all_tools_when_embedding_fails(standin, tmp_path):
    plugin = tmp_path / "many.py"
    plugin.write_text("\n\n".join(
        f'def t{i}(x: str) -> str:\n    """Thing {i}."""\n    return x\n' for i in range(15)))
    standin.fail_embeds(10, status=500)
    r = invoke("chat", "--json", "--functions", str(plugin), "q")
    assert r.exit_code == 0
    assert len(standin.chat_requests()[-1]["tools"]) == 20
    assert "tool" in r.stderr and "warning" in r.stderr
    done = [json.loads(line) for line in r.stdout.splitlines()][-1]["payload"]
    assert done["selection"]["method"] == "all"
    assert done["selection"]["reason"].startswith("search error: ")


def test_tools_command_lists_and_shows(standin, tmp_path):
    r = invoke("tools", "--json")
    names = [x["name"] for x in r.records()]
    assert {"calculator", "read_file", "list_directory"} <= set(names)
    assert all(x["type"] == "tool" for x in r.records())
    r = invoke("tools", "show", "calculator", "--json")
    (rec,) = r.records()
    assert rec["parameters"]["properties"]["expression"]["type"] == "string"
    assert rec["core"] is True
    r = invoke("tools", "show", "nope")
    assert r.exit_code == 6


def test_approve_asks_on_the_terminal_and_a_no_is_fed_back(standin):
    standin.script(Reply(tool_calls=[calc("5+5")]), Reply(content="You declined."))
    code, screen = run_in_pty(["chat", "--approve", "calculate 5 + 5"], answer=b"n\n")
    assert code == 0
    assert b'Run calculator(expression="5+5")? [y/N]' in screen
    sent = standin.chat_requests()[-1]["messages"][-1]
    assert sent["role"] == "tool" and "declined" in sent["content"]


def test_approve_yes_runs_the_tool(standin):
    standin.script(Reply(tool_calls=[calc("5+5")]), Reply(content="10"))
    code, _ = run_in_pty(["chat", "--approve", "calculate 5 + 5"], answer=b"y\n")
    assert code == 0
    assert standin.chat_requests()[-1]["messages"][-1]["content"] == "10"


# --- A hostile plugin, installed the way users install one -----------------------------

HOSTILE_PLUGIN = '''
"""Tools that misbehave: exit, interrupt, print, and write to file descriptor 1."""
import os
import signal
import subprocess
import sys
import time

from localgpt_cli.tools.base import Tool


def _tool(name, handler):
    return Tool(name=name, description=f"The {name} tool.",
                parameters={"type": "object", "properties": {}}, handler=handler)


def _exit(args):
    raise SystemExit(3)


def _sys_exit(args):
    sys.exit()


def _interrupt(args):
    raise KeyboardInterrupt


def _generator_exit(args):
    raise GeneratorExit


def _chatty(args):
    print("printed by print()")
    sys.stdout.write("written to sys.stdout\\n")
    sys.__stdout__.write("written to sys.__stdout__\\n")
    os.write(1, b"written to fd 1\\n")
    subprocess.run([sys.executable, "-c", "print('written by a subprocess')"], check=True)
    return "the return value"


def _print_then_fail(args):
    print("about to fail")
    raise ValueError("bad state")


def _ctrl_c(args):
    os.kill(os.getpid(), signal.SIGINT)  # as the terminal does on Ctrl-C
    time.sleep(10)
    return "not reached"


def _ctrl_c_swallowed(args):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)
    except KeyboardInterrupt:
        pass
    return "swallowed the interrupt"


def tools():
    return [_tool("exit", _exit), _tool("sys_exit", _sys_exit),
            _tool("interrupt", _interrupt), _tool("generator_exit", _generator_exit),
            _tool("chatty", _chatty), _tool("print_then_fail", _print_then_fail),
            _tool("ctrl_c", _ctrl_c), _tool("ctrl_c_swallowed", _ctrl_c_swallowed)]
'''


@pytest.fixture
def hostile_plugin(tmp_path, monkeypatch):
    """An installed distribution with a `localgpt.tools` entry point, on PYTHONPATH."""
    site = tmp_path / "site"
    dist = site / "hostile_tools-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "hostile_tools.py").write_text(HOSTILE_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[localgpt.tools]\nhostile = hostile_tools:tools\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return site


def call(name: str) -> dict:
    return {"name": name, "arguments": {}}


def test_the_plugin_is_listed_as_installed(standin, hostile_plugin):
    r = run("tools", "list", "--json")
    assert r.exit_code == 0, r.stderr
    sources = {x["name"]: x["source"] for x in r.records()}
    assert sources["exit"] == sources["chatty"] == "plugin:hostile"


def test_a_plugin_that_exits_interrupts_or_prints_does_not_end_the_turn(
    standin, hostile_plugin, isolated_env
):
    names = ["exit", "sys_exit", "interrupt", "generator_exit", "chatty", "print_then_fail"]
    standin.script(Reply(tool_calls=[call(n) for n in names]), Reply(content="All done."))
    r = run("chat", "--json", "use every tool")
    assert r.exit_code == 0, r.stderr
    packets = packets_of(r)  # every stdout line is a StreamPacket, one done, last
    assert "".join(by_type(packets, "token")) == "All done."
    assert packets[-1]["payload"]["reason"] == "stop"
    results = {x["name"]: x for x in by_type(packets, "tool_result")}
    assert list(results) == names
    assert [results[n]["ok"] for n in names] == [False] * 4 + [True, False]
    assert results["exit"]["result"] == "Error: exit failed: SystemExit: 3"
    assert results["sys_exit"]["result"] == "Error: sys_exit failed: SystemExit"
    assert results["interrupt"]["result"] == "Error: interrupt failed: KeyboardInterrupt"
    assert results["generator_exit"]["result"] == "Error: generator_exit failed: GeneratorExit"
    # What a tool writes to stdout, by any route, is part of its result, in order.
    assert results["chatty"]["result"] == (
        "printed by print()\nwritten to sys.stdout\nwritten to sys.__stdout__\n"
        "written to fd 1\nwritten by a subprocess\nthe return value"
    )
    assert results["print_then_fail"]["result"] == (
        "Error: print_then_fail failed: ValueError: bad state\n"
        "Output before the failure:\nabout to fail"
    )
    assert "written" not in r.stderr and "printed" not in r.stderr
    # The model read the same results, and the turn is in the history.
    sent = standin.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == [
        results[n]["result"] for n in names]
    with SQLiteStore.open(Path(os.environ["LOCALGPT_HOME"]) / "history.db") as store:
        stored = store.get_message(packets[-1]["payload"]["message_id"])
    assert stored.content == "All done."


@pytest.mark.parametrize("tool", ["ctrl_c", "ctrl_c_swallowed"])
def test_a_real_ctrl_c_during_a_tool_still_ends_the_turn(standin, hostile_plugin, tool):
    standin.script(Reply(tool_calls=[call(tool)]), Reply(content="not asked"))
    start = time.monotonic()
    r = run("chat", "--json", "q")
    assert time.monotonic() - start < 8
    assert r.exit_code == 130, r.stderr
    packets = packets_of(r)
    assert packets[-1]["payload"]["reason"] == "aborted"
    assert by_type(packets, "tool_result") == []
    assert len(standin.chat_requests()) == 1
