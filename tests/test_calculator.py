"""The calculator tool: right answers, sensible formatting, and bounded refusals."""

from __future__ import annotations

import time

import pytest

from localgpt_cli.tools.base import ToolError
from localgpt_cli.tools.calculator import calculator_tool, evaluate


def calc(expression: str) -> str:
    """Through the tool, as the agent loop calls it (argument validation included)."""
    return calculator_tool().run({"expression": expression})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5+5", "10"),
        ("5 + 5", "10"),
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("10 - 4 - 3", "3"),
        ("2 ** 3 ** 2", "512"),
        ("-3 ** 2", "-9"),
        ("-(-4)", "4"),
        ("+7", "7"),
        ("7 // 2", "3"),
        ("7 % 3", "1"),
        ("10 / 4", "2.5"),
        ("10 / 2", "5"),
        ("1/3", "0.3333333333333333"),
        ("0.1 + 0.2", "0.3"),
        ("2^10", "1024"),
        ("2 ** -2", "0.25"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623730951"),
        ("math.sqrt(2)", "1.4142135623730951"),
        ("log(e)", "1"),
        ("log(1000, 10)", "3"),
        ("log10(1000)", "3"),
        ("sin(pi / 2)", "1"),
        ("cos(0)", "1"),
        ("pi", "3.141592653589793"),
        ("math.pi * 2", "6.283185307179586"),
        ("e", "2.718281828459045"),
        ("factorial(5)", "120"),
        ("factorial(20)", "2432902008176640000"),
        ("comb(10, 3)", "120"),
        ("abs(-3.5)", "3.5"),
        ("round(2.567, 2)", "2.57"),
        ("max(1, 7, 3)", "7"),
        ("1e3 * 2", "2000"),
        ("2 ** 100", "1267650600228229401496703205376"),
        ("240 * 15 / 100", "36"),
        ("1e308 * 10", "inf"),
    ],
)
def test_correct_results(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("__import__('os').system('echo hi')", "attribute access is not allowed"),
        ("(1).__class__", "attribute access is not allowed"),
        ("math.__dict__", "attribute access is not allowed"),
        ("os.system('x')", "attribute access is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("open", "unknown name 'open'"),
        ("lambda: 1", "a lambda is not allowed"),
        ("[i for i in range(3)]", "a comprehension is not allowed"),
        ("(1, 2)[0]", "a subscript is not allowed"),
        ("1 < 2", "a comparison is not allowed"),
        ("'a' * 3", "only numbers are allowed"),
        ("True + 1", "only numbers are allowed"),
        ("1j * 2", "only numbers are allowed"),
        ("sqrt", "sqrt is a function"),
        ("sqrt(x=4)", "positional arguments only"),
        ("9**9**9", "result too large"),
        ("10**10000", "result too large"),
        ("2**20000", "result too large"),
        ("factorial(100000)", "factorial argument too large"),
        ("perm(100000)", "too large"),
        ("comb(10**9, 5)", "too large"),
        ("round(1, -10**9)", "digits must be between"),
        ("exp(1000)", "result too large"),
        ("1/0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ** (1/3)", "not a real number"),
        ("2 +", "cannot parse"),
        ("", "empty"),
        ("1" + "+1" * 300, "too long"),
        ("1" + "+1" * 240, "too complex"),
    ],
)
def test_refusals_are_clear_tool_errors(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as info:
        calc(expression)
    assert message in str(info.value)


def test_refusals_are_fast() -> None:
    """The bounds apply before computing, not after a minute of work."""
    start = time.perf_counter()
    for expression in ("9**9**9", "factorial(100000)", "10**10**10", "2**(2**64)"):
        with pytest.raises(ToolError):
            evaluate(expression)
    assert time.perf_counter() - start < 0.5


def test_unknown_name_lists_what_is_allowed() -> None:
    with pytest.raises(ToolError) as info:
        calc("foo(2)")
    text = str(info.value)
    assert "sqrt" in text and "factorial" in text and "pi" in text


def test_arguments_are_validated() -> None:
    with pytest.raises(ToolError, match="missing required argument 'expression'"):
        calculator_tool().run({})
    with pytest.raises(ToolError, match="argument 'expression' must be a string"):
        calculator_tool().run({"expression": 5})


def test_definition_is_core_with_examples() -> None:
    tool = calculator_tool()
    assert tool.core and 2 <= len(tool.examples) <= 4
    assert tool.to_ollama()["function"]["parameters"]["required"] == ["expression"]
