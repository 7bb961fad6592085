"""The tool protocol, argument validation, the registry, plugins and functions files."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from localgpt_cli.errors import NotFound, UsageError
from localgpt_cli.rag.types import Hit
from localgpt_cli.tools.base import Tool, ToolError, describe, validate_arguments
from localgpt_cli.tools.functions import load_functions_file
from localgpt_cli.tools.registry import (
    Registry,
    ToolContext,
    build_registry,
    builtin_listing,
    builtin_registry,
    load_plugins,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "city name"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "scale": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "verbose": {"type": "boolean"},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def make_tool(name: str = "weather", **kw: Any) -> Tool:
    return Tool(
        name=name,
        description=kw.pop("description", "Weather forecast for a city."),
        parameters=kw.pop("parameters", SCHEMA),
        handler=kw.pop("handler", lambda args: f"sunny in {args['city']}"),
        **kw,
    )


# --- Tool protocol ----------------------------------------------------------------------


def test_to_ollama_keeps_the_schema_intact() -> None:
    definition = make_tool().to_ollama()
    assert definition == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather forecast for a city.",
            "parameters": SCHEMA,
        },
    }
    props = definition["function"]["parameters"]["properties"]
    assert props["tags"]["items"] == {"type": "integer"}
    assert props["units"]["enum"] == ["metric", "imperial"]
    assert props["days"]["default"] == 3


def test_describe_record() -> None:
    tool = make_tool(core=True, source="plugin:wx")
    assert describe(tool) == {
        "type": "tool",
        "name": "weather",
        "description": "Weather forecast for a city.",
        "source": "plugin:wx",
        "group": "general",
        "core": True,
        "preview": False,
            "network": False,
        "parameters": SCHEMA,
    }


def test_selection_text_joins_name_description_and_examples() -> None:
    tool = make_tool(examples=("rain tomorrow?", "forecast for Oslo"))
    assert tool.selection_text() == (
        "weather — Weather forecast for a city. | rain tomorrow? | forecast for Oslo"
    )


def test_run_returns_text_and_renders_other_values_as_json() -> None:
    assert make_tool().run({"city": "Oslo"}) == "sunny in Oslo"
    as_dict = make_tool(handler=lambda args: {"city": args["city"], "temp": 21})
    assert as_dict.run({"city": "Oslo"}) == '{"city": "Oslo", "temp": 21}'
    assert make_tool(handler=lambda args: None).run({"city": "x"}) == ""


def test_run_turns_a_crashing_handler_into_a_tool_error() -> None:
    def boom(args: dict[str, Any]) -> str:
        raise KeyError("station")

    with pytest.raises(ToolError, match="weather failed: KeyError: 'station'"):
        make_tool(handler=boom).run({"city": "Oslo"})


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (KeyboardInterrupt(), "weather failed: KeyboardInterrupt"),
        (SystemExit(2), "weather failed: SystemExit: 2"),
        (GeneratorExit(), "weather failed: GeneratorExit"),
    ],
)
def test_run_turns_a_raised_base_exception_into_a_tool_error(
    exc: BaseException, message: str
) -> None:
    def raises(args: dict[str, Any]) -> str:
        raise exc

    with pytest.raises(ToolError) as info:
        make_tool(handler=raises).run({"city": "Oslo"})
    assert str(info.value) == message


def test_run_lets_a_real_sigint_through_and_restores_the_handler() -> None:
    def ctrl_c(args: dict[str, Any]) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        return "not reached"

    before = signal.getsignal(signal.SIGINT)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        make_tool(handler=ctrl_c).run({"city": "Oslo"})
    assert time.monotonic() - start < 4
    assert signal.getsignal(signal.SIGINT) is before


def test_run_captures_stdout_and_restores_it(capfd: pytest.CaptureFixture[str]) -> None:
    def chatty(args: dict[str, Any]) -> str:
        print("from print")
        os.write(1, b"from fd 1\n")
        return "returned"

    stdout = sys.stdout
    assert make_tool(handler=chatty).run({"city": "Oslo"}) == "from print\nfrom fd 1\nreturned"
    assert make_tool(handler=lambda args: print("only printed")).run({"city": "x"}) == (
        "only printed"
    )
    assert sys.stdout is stdout
    print("after")
    assert capfd.readouterr().out == "after\n"


def test_run_cuts_a_flood_of_output() -> None:
    from localgpt_cli.tools.isolation import MAX_OUTPUT_CHARS

    out = make_tool(handler=lambda args: print("x" * 200_000)).run({"city": "x"})
    assert out.startswith("x" * MAX_OUTPUT_CHARS + "\n[… truncated: showed 20000 characters")
    assert len(out) < MAX_OUTPUT_CHARS + 100


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": "has space"}, "tool name 'has space' is invalid"),
        ({"name": "x" * 65}, "is invalid"),
        ({"parameters": {"type": "string"}}, "parameters must be a JSON Schema of type object"),
        ({"handler": "not callable"}, "handler is not callable"),
        ({"examples": "one string"}, "examples must be a list"),
    ],
)
def test_invalid_definitions_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_tool(**kw)


# --- Argument validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing required argument 'city'"),
        ({"city": 5}, "argument 'city' must be a string, got integer 5"),
        ({"city": "x", "days": "3"}, "argument 'days' must be an integer, got string \"3\""),
        ({"city": "x", "days": 2.5}, "argument 'days' must be an integer, got number 2.5"),
        ({"city": "x", "days": True}, "argument 'days' must be an integer, got boolean true"),
        ({"city": "x", "days": 0}, "argument 'days' must be at least 1, got 0"),
        ({"city": "x", "days": 9}, "argument 'days' must be at most 7, got 9"),
        ({"city": "x", "units": "kelvin"}, 'must be one of "metric", "imperial"'),
        ({"city": "x", "scale": "big"}, "argument 'scale' must be a number"),
        ({"city": "x", "tags": "1,2"}, "argument 'tags' must be an array"),
        ({"city": "x", "tags": [1, "b"]}, "argument 'tags[1]' must be an integer"),
        ({"city": "x", "verbose": "yes"}, "argument 'verbose' must be a boolean"),
        ({"city": "x", "country": "NO"}, "unknown argument 'country' (expected: city, days"),
    ],
)
def test_validation_messages_name_the_argument(arguments: dict, message: str) -> None:
    with pytest.raises(ToolError) as info:
        validate_arguments(make_tool(), arguments)
    assert message in str(info.value)


def test_validation_accepts_and_normalises() -> None:
    tool = make_tool()
    assert validate_arguments(tool, {"city": "x", "days": 2.0}) == {"city": "x", "days": 2}
    assert validate_arguments(tool, {"city": "x", "scale": 3}) == {"city": "x", "scale": 3}
    with pytest.raises(ToolError, match="arguments for weather must be an object, got array"):
        validate_arguments(tool, [1, 2])  # type: ignore[arg-type]
    no_args = make_tool(parameters={"type": "object", "properties": {}})
    assert validate_arguments(no_args, None) == {}


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Oslo"},
        {"city": "Oslo", "days": 7, "units": "metric", "tags": [1, 2], "verbose": False},
        {"city": "Oslo", "scale": 1.5},
        {},
        {"city": None},
        {"city": "x", "tags": [1.5]},
        {"city": "x", "extra": 1},
        {"city": "x", "units": "SI"},
        {"city": "x", "days": 8},
    ],
)
def test_validation_agrees_with_jsonschema(arguments: dict) -> None:
    reference_ok = jsonschema.Draft202012Validator(SCHEMA).is_valid(arguments)
    try:
        validate_arguments(make_tool(), arguments)
        ours_ok = True
    except ToolError:
        ours_ok = False
    assert ours_ok == reference_ok


def test_builtin_schemas_are_valid_json_schema(tmp_path: Path) -> None:
    context = full_context(tmp_path)
    for tool in builtin_registry(context):
        jsonschema.Draft202012Validator.check_schema(tool.parameters)


# --- Registry and built-ins -------------------------------------------------------------


def full_context(tmp_path: Path, **kw: Any) -> ToolContext:
    defaults: dict[str, Any] = {
        "cwd": tmp_path,
        "search": lambda q, k, c: [],
        "ollama_api_key_set": True,
        "web_search": lambda q, n: {"results": []},
        "web_fetch": lambda url: {"title": "t", "content": "c"},
    }
    return ToolContext(**{**defaults, **kw})


def test_registry_rejects_duplicate_names() -> None:
    registry = Registry([make_tool(source="builtin")])
    with pytest.raises(UsageError) as info:
        registry.add(make_tool(source="file:/tmp/f.py"))
    assert "'weather' from file:/tmp/f.py is already taken by builtin" in str(info.value)


def test_registry_lookup_and_only() -> None:
    registry = Registry([make_tool("a"), make_tool("b"), make_tool("c")])
    assert registry.names() == ["a", "b", "c"] and len(registry) == 3
    assert registry.get("zzz") is None
    with pytest.raises(NotFound, match="No tool named 'zzz'"):
        registry["zzz"]
    assert registry.only(["c", "a"]).names() == ["c", "a"]
    with pytest.raises(UsageError, match="Unknown tool\\(s\\): zzz"):
        registry.only(["a", "zzz"])
    assert [d["function"]["name"] for d in registry.to_ollama()] == ["a", "b", "c"]


def test_builtins_depend_on_the_context(tmp_path: Path) -> None:
    everything = builtin_registry(full_context(tmp_path)).names()
    assert everything == [
        "calculator",
        "read_file",
        "list_directory",
        "search_documents",
        "web_search",
        "web_fetch",
        "propose_command",
        "propose_edit",
    ]
    no_kb = builtin_registry(full_context(tmp_path, search=None)).names()
    assert "search_documents" not in no_kb
    listing = builtin_listing(full_context(tmp_path, search=None, no_search="no kb here"))
    assert [t.name for t, _ in listing] == everything
    (unavailable,) = [(t, why) for t, why in listing if why]
    assert unavailable[0].name == "search_documents" and unavailable[1] == "no kb here"
    with pytest.raises(ToolError, match="unavailable: no kb here"):
        unavailable[0].run({"query": "x"})
    no_key = builtin_registry(full_context(tmp_path, ollama_api_key_set=False)).names()
    assert "web_search" not in no_key and "web_fetch" not in no_key


def test_api_key_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "k")
    assert ToolContext().ollama_api_key_set
    monkeypatch.delenv("OLLAMA_API_KEY")
    assert not ToolContext().ollama_api_key_set


def test_builtins_have_examples_and_core_flags(tmp_path: Path) -> None:
    registry = builtin_registry(full_context(tmp_path))
    core = {t.name for t in registry if t.core}
    assert core == {"calculator", "read_file", "list_directory", "search_documents",
                    "propose_command"}
    groups = {t.name: t.group for t in registry}
    assert groups == {"calculator": "math", "read_file": "files", "list_directory": "files",
                      "search_documents": "knowledge", "web_search": "web", "web_fetch": "web",
                      "propose_command": "shell", "propose_edit": "files"}
    assert {t.name for t in registry if t.preview} == {"propose_command", "propose_edit"}
    for tool in registry:
        assert 2 <= len(tool.examples) <= 4, tool.name
        assert tool.source == "builtin"


def test_file_roots_come_from_the_context(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.txt").write_text("kb text", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    with_cwd = builtin_registry(ToolContext(cwd=work, file_roots=[kb]))
    assert with_cwd["read_file"].run({"path": str(kb / "a.txt")}) == "kb text"
    only_kb = builtin_registry(ToolContext(cwd=work, file_roots=[kb], include_cwd=False))
    (work / "w.txt").write_text("w", encoding="utf-8")
    with pytest.raises(ToolError, match="outside the allowed folders"):
        only_kb["read_file"].run({"path": "w.txt"})


# --- search_documents and the web tools -------------------------------------------------


def test_search_documents_formats_labelled_excerpts(tmp_path: Path) -> None:
    calls = []

    def search(query: str, k: int, collection: str | None) -> list[Hit]:
        calls.append((query, k, collection))
        return [
            Hit(
                rank=1,
                score=0.9,
                document_id="d1",
                path="notes/vpn.md",
                chunk=3,
                text="Use WireGuard.\n",
            ),
            Hit(
                rank=2,
                score=0.7,
                document_id="d2",
                path="report.pdf",
                chunk=0,
                page=2,
                text="Q3 revenue rose.",
            ),
        ]

    tool = builtin_registry(full_context(tmp_path, search=search, search_k=4))["search_documents"]
    out = tool.run({"query": "vpn setup"})
    assert calls == [("vpn setup", 4, None)]
    assert out == (
        "2 passage(s) for 'vpn setup':\n\n"
        "[Source: notes/vpn.md, chunk 3]\nUse WireGuard.\n\n"
        "[Source: report.pdf, chunk 0, page 2]\nQ3 revenue rose."
    )
    tool.run({"query": "x", "k": 2, "collection": "work"})
    assert calls[-1] == ("x", 2, "work")
    with pytest.raises(ToolError, match="'k' must be at most 20"):
        tool.run({"query": "x", "k": 50})


def test_search_documents_without_hits_and_with_errors(tmp_path: Path) -> None:
    from localgpt_cli.errors import InvalidInput

    empty = builtin_registry(full_context(tmp_path))["search_documents"]
    out = empty.run({"query": "x", "collection": "c"})
    assert out == "No passages in collection 'c' match 'x'."

    def mismatch(query: str, k: int, collection: str | None) -> list[Hit]:
        raise InvalidInput("Collection 'default' was embedded with another model.")

    failing = builtin_registry(full_context(tmp_path, search=mismatch))["search_documents"]
    with pytest.raises(ToolError, match="search_documents failed: Collection 'default' was"):
        failing.run({"query": "x"})


def test_web_tools_format_client_responses(tmp_path: Path) -> None:
    seen: list[Any] = []

    def web_search(query: str, max_results: int) -> Any:
        seen.append((query, max_results))
        result = types.SimpleNamespace(
            title="Ollama", url="https://ollama.com", content="Run models."
        )
        return types.SimpleNamespace(results=[result])

    def web_fetch(url: str) -> Any:
        seen.append(url)
        links = [f"https://x/{i}" for i in range(25)]
        return {"title": "Blog", "content": "z" * 25_000, "links": links}

    registry = builtin_registry(full_context(tmp_path, web_search=web_search, web_fetch=web_fetch))
    found = registry["web_search"].run({"query": "ollama"})
    assert found == "1 web result(s) for 'ollama':\n\n1. Ollama\nhttps://ollama.com\nRun models."
    assert seen[0] == ("ollama", 5)
    page = registry["web_fetch"].run({"url": "https://ollama.com/blog"})
    assert page.startswith("Blog\nhttps://ollama.com/blog\n\nzzz")
    assert "[… truncated: showed 20000 of 25000 characters]" in page
    assert page.endswith("https://x/19\n[… 5 more links]")
    with pytest.raises(ToolError, match="is not an http\\(s\\) URL"):
        registry["web_fetch"].run({"url": "file:///etc/passwd"})


# --- Plugins -----------------------------------------------------------------------------


@pytest.fixture
def plugin_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("fake_localgpt_plugin")
    module.single = make_tool("currency", source="whatever")  # type: ignore[attr-defined]
    module.factory = lambda: [make_tool("stocks"), make_tool("crypto")]  # type: ignore[attr-defined]
    module.not_a_tool = 42  # type: ignore[attr-defined]
    module.clash = make_tool("calculator")  # type: ignore[attr-defined]

    def broken() -> Tool:
        raise RuntimeError("needs an API token")

    module.broken = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *attrs: str) -> None:
    eps = [
        importlib.metadata.EntryPoint(
            name=attr, value=f"fake_localgpt_plugin:{attr}", group="localgpt.tools"
        )
        for attr in attrs
    ]

    def entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_plugins_load_tools_lists_and_factories(
    plugin_module: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_entry_points(monkeypatch, "single", "factory")
    tools, warnings = load_plugins()
    assert warnings == []
    assert [(t.name, t.source) for t in tools] == [
        ("currency", "plugin:single"),
        ("stocks", "plugin:factory"),
        ("crypto", "plugin:factory"),
    ]
    assert plugin_module.single.source == "whatever"  # the plugin's object is not changed


def test_broken_plugins_become_warnings(
    plugin_module: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_entry_points(monkeypatch, "broken", "not_a_tool", "missing", "single")
    tools, warnings = load_plugins()
    assert [t.name for t in tools] == ["currency"]
    assert len(warnings) == 3
    assert (
        "Tool plugin 'broken' (fake_localgpt_plugin:broken) was skipped: RuntimeError: "
        "needs an API token" in warnings[0]
    )
    assert "returned int, not a Tool" in warnings[1]
    assert "'missing'" in warnings[2] and "AttributeError" in warnings[2]


def test_build_registry_skips_a_clashing_plugin(
    plugin_module: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_entry_points(monkeypatch, "clash", "single")
    registry, warnings = build_registry(ToolContext(cwd=tmp_path))
    assert registry["calculator"].source == "builtin"
    assert "currency" in registry
    assert len(warnings) == 1 and "'calculator' from plugin:clash is already taken" in warnings[0]
    no_plugins, _ = build_registry(ToolContext(cwd=tmp_path), plugins=False)
    assert "currency" not in no_plugins


# --- Functions files ---------------------------------------------------------------------

FUNCTIONS = '''
"""My tools."""
from __future__ import annotations

import os
from os.path import join
from typing import Annotated, Literal, Optional


def convert_currency(
    amount: float,
    to: Literal["EUR", "USD", "GBP"],
    date: Optional[str] = None,
    fee: Annotated[float, "fee in percent"] = 0.0,
) -> str:
    """Convert an amount of money
    into another currency.

    Uses a fixed table of rates.

    Args:
        amount: how much money
        to (str): target currency
    Examples:
        - how many euros is 50 dollars?
        - convert 10 GBP to USD
    """
    return f"{amount * 0.9 * (1 - fee / 100):.2f} {to} on {date}"


def tally(values: list[int], label: str | None, scale=2, flags: dict | None = None) -> dict:
    """Sum numbers."""
    return {"label": label, "total": sum(values) * scale}


def no_doc(flag: bool = False):
    return "flag" if flag else "no flag"


def _private(x: int) -> int:
    return x
'''


def write(tmp_path: Path, text: str, name: str = "funcs.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_functions_file_schema_from_signature_and_docstring(tmp_path: Path) -> None:
    path = write(tmp_path, FUNCTIONS)
    tools = {t.name: t for t in load_functions_file(path)}
    assert list(tools) == ["convert_currency", "tally", "no_doc"]
    convert = tools["convert_currency"]
    assert convert.description == "Convert an amount of money into another currency."
    assert convert.examples == ("how many euros is 50 dollars?", "convert 10 GBP to USD")
    assert convert.source == f"file:{path.resolve()}"
    assert convert.parameters == {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "description": "how much money"},
            "to": {
                "type": "string",
                "enum": ["EUR", "USD", "GBP"],
                "description": "target currency",
            },
            "date": {"type": "string"},
            "fee": {"type": "number", "description": "fee in percent", "default": 0.0},
        },
        "required": ["amount", "to"],
        "additionalProperties": False,
    }
    tally = tools["tally"]
    assert tally.parameters["properties"] == {
        "values": {"type": "array", "items": {"type": "integer"}},
        "label": {"type": "string"},
        "scale": {"type": "integer", "default": 2},
        "flags": {"type": "object"},
    }
    assert tally.parameters["required"] == ["values"]
    assert tools["no_doc"].description == "no doc"
    assert "required" not in tools["no_doc"].parameters


def test_functions_file_tools_run(tmp_path: Path) -> None:
    tools = {t.name: t for t in load_functions_file(write(tmp_path, FUNCTIONS))}
    assert tools["convert_currency"].run({"amount": 10, "to": "EUR"}) == "9.00 EUR on None"
    assert tools["tally"].run({"values": [1, 2]}) == '{"label": null, "total": 6}'
    with pytest.raises(ToolError, match="argument 'to' must be one of"):
        tools["convert_currency"].run({"amount": 10, "to": "JPY"})
    assert tools["no_doc"].run({"flag": True}) == "flag"


def test_a_raising_function_is_a_tool_error(tmp_path: Path) -> None:
    path = write(tmp_path, "def div(a: int, b: int) -> float:\n    return a / b\n")
    (div,) = load_functions_file(path)
    assert div.run({"a": 1, "b": 4}) == "0.25"
    with pytest.raises(ToolError, match="div failed: ZeroDivisionError: division by zero"):
        div.run({"a": 1, "b": 0})


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("def ok(x: int) -> int:\n    return x\n\ndef bad(:\n    pass\n", 4, "syntax error"),
        ("import os\n\nraise RuntimeError('no config')\n", 3, "RuntimeError: no config"),
        ("def f(x):\n    return x\n", 1, "parameter 'x' has no type hint"),
        ("def f(x: set[int]):\n    return x\n", 1, "parameter 'x' has type set"),
        ("def f(x: int | str):\n    return x\n", 1, "a union of several types"),
        ("def f(*args: int):\n    return 0\n", 1, "*args, **kwargs or positional-only"),
        ("\n\ndef f(x: 'Nope'):\n    return x\n", 3, "cannot resolve its type hints"),
    ],
)
def test_functions_file_errors_name_file_and_line(
    tmp_path: Path, source: str, line: int, message: str
) -> None:
    path = write(tmp_path, source)
    with pytest.raises(UsageError) as info:
        load_functions_file(path)
    text = str(info.value)
    assert f"{path.resolve()}:{line}:" in text
    assert message in text


def test_functions_file_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="Cannot read functions file"):
        load_functions_file(tmp_path / "nope.py")
    with pytest.raises(UsageError, match="defines no public function"):
        load_functions_file(write(tmp_path, "import os\nfrom os.path import join\n"))


def test_functions_file_clash_with_a_builtin_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path, "def calculator(expression: str) -> str:\n    return '42'\n")
    with pytest.raises(UsageError, match="'calculator' from file:.* is already taken by builtin"):
        build_registry(ToolContext(cwd=tmp_path), plugins=False, functions_files=[path])
    other = write(tmp_path, "def shout(text: str) -> str:\n    return text.upper()\n", "b.py")
    registry, _ = build_registry(ToolContext(cwd=tmp_path), plugins=False, functions_files=[other])
    assert registry["shout"].run({"text": "hi"}) == "HI"


def test_importing_the_tools_package_stays_light() -> None:
    """The CLI may import the registry at start-up: numpy, pypdf(ium2), ollama load on use."""
    import subprocess

    code = (
        "import sys, localgpt_cli.tools.registry, localgpt_cli.tools.selection;"
        "print(sorted(m for m in ('numpy', 'pypdf', 'pypdfium2', 'ollama')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- `localgpt tools list` shows every built-in, saying which cannot be offered ----------


def test_tools_list_shows_search_documents_unavailable_without_a_knowledge_base(
    standin: Any,
) -> None:
    from tests.cli import invoke

    r = invoke("tools", "list", "--json")
    assert r.exit_code == 0, r.stderr
    records = {x["name"]: x for x in r.records()}
    assert list(records)[:6] == [
        "calculator", "read_file", "list_directory", "search_documents", "web_search",
        "web_fetch",
    ]
    search = records["search_documents"]
    assert search["available"] is False
    assert search["note"] == (
        "unavailable: the collection 'default' has no documents (add some with "
        "`localgpt ingest PATH`)"
    )
    assert records["web_search"]["available"] is False
    assert "OLLAMA_API_KEY" in records["web_search"]["note"]
    assert records["calculator"]["available"] is True and records["calculator"]["note"] is None
    text = invoke("tools", "list")
    (row,) = [line for line in text.stdout.splitlines() if line.startswith("search_documents")]
    assert row.split("\t")[-1].startswith("unavailable: the collection 'default' has no")
    shown = invoke("tools", "show", "search_documents", "--json")
    assert shown.exit_code == 0 and shown.records()[0]["available"] is False


def test_tools_list_shows_search_documents_available_with_a_knowledge_base(
    standin: Any, tmp_path: Path
) -> None:
    from tests.cli import invoke

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome notes about the VPN.\n")
    assert invoke("ingest", str(tmp_path / "docs")).exit_code == 0
    records = {x["name"]: x for x in invoke("tools", "--json").records()}
    assert records["search_documents"]["available"] is True
    assert records["search_documents"]["note"] is None
