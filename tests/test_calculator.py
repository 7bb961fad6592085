"""The calculator tool: right answers, sensible formatting, and bounded refusals."""

from __future__ import annotations

import math
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


# `^` is how people and models write a power: the calculator reads it as `**`, with the
# precedence and right-associativity of `**`, never as xor. Each expression is checked
# against Python's own evaluation of the same text with `^` written as `**`.
CARET_POWERS = [
    "2^10-1",
    "2^3^2",
    "-2^2",
    "(-2)^2",
    "2^-2",
    "-2^-2",
    "2^10",
    "2^0",
    "0^0",
    "1^1000",
    "3^2*2",
    "2*3^2",
    "2^3*4^2",
    "1+2^3",
    "2^3+1",
    "(1+2)^3",
    "2^(1+2)",
    "2^3^0",
    "2^2^3^1",
    "10^2/4",
    "100/10^2",
    "7%2^2",
    "2^5//3",
    "-3^3",
    "(-3)^3",
    "4^0.5",
    "2.5^2",
    "10^-3",
    "1e2^2",
    "2^100-2^99",
    "sqrt(2^8)",
    "2^sqrt(4)",
    "abs(-2)^3",
    "max(2, 3)^2",
    "+2^2",
    "2 ^ 10 - 1",
]


def test_caret_table_has_at_least_30_expressions() -> None:
    assert len(set(CARET_POWERS)) >= 30


@pytest.mark.parametrize("expression", CARET_POWERS)
def test_caret_is_power_with_powers_precedence(expression: str) -> None:
    names = {"sqrt": math.sqrt, "abs": abs, "max": max}
    # The reference is Python itself, on the `**` spelling of the same expression.
    python = eval(expression.replace("^", "**"), {"__builtins__": {}}, names)
    got = calc(expression)
    if isinstance(python, int):
        assert got == str(python)
    else:
        assert math.isclose(float(got), python, rel_tol=1e-15), (got, python)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("2^10-1", "1023"), ("2^3^2", "512"), ("-2^2", "-4"), ("2^-1", "0.5")],
)
def test_caret_examples_from_the_issue(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9^9^9", "result too large"),
        ("10^10000", "result too large"),
        ("2^(2^64)", "result too large"),
        ("(-8)^(1/3)", "not a real number"),
        ("0^-1", "division by zero"),
        ("2^", "cannot parse '2^'"),
    ],
)
def test_caret_keeps_the_bounds_of_powers(expression: str, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ToolError) as info:
        calc(expression)
    assert message in str(info.value)
    assert time.perf_counter() - start < 0.5
