"""The calculator tool: arithmetic and `math` functions through a whitelisted AST walk.

Small models are bad at arithmetic and good at writing expressions, so the tool takes an
expression. It never reaches `eval`: the expression is parsed, every node is checked
against a whitelist, and every step is bounded (expression length, nesting, integer
size, exponent, factorial argument) so that a model cannot hang the CLI with
`9**9**9` or exhaust memory with `factorial(100000)`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from localgpt_cli.tools.base import Tool, ToolError

MAX_EXPRESSION_CHARS = 500
MAX_DEPTH = 200
MAX_INT_BITS = 10_000  # about 3,000 decimal digits
MAX_FACTORIAL = 1_000
MAX_COMB_N = 10_000  # comb(10000, 5000) still fits in MAX_INT_BITS

Number = int | float

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(math, name)
    for name in (
        "sqrt",
        "cbrt",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "degrees",
        "radians",
        "hypot",
        "floor",
        "ceil",
        "trunc",
        "fabs",
        "fmod",
        "copysign",
        "gcd",
        "lcm",
        "isqrt",
        "erf",
        "erfc",
        "gamma",
        "lgamma",
        "factorial",
        "comb",
        "perm",
        "pow",
    )
    if hasattr(math, name)  # cbrt and exp2 are 3.11+
}
_FUNCTIONS.update({"abs": abs, "round": round, "min": min, "max": max})
_CONSTANTS: dict[str, float] = {
    "pi": math.pi,
    "e": math.e,
    "tau": math.tau,
    "inf": math.inf,
    "nan": math.nan,
}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

_NODE_WORDS = {
    ast.Attribute: "attribute access",
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.Subscript: "a subscript",
    ast.Compare: "a comparison",
    ast.BoolOp: "a boolean operator",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "an assignment",
    ast.JoinedStr: "a string",
}


def _allowed_names() -> str:
    return ", ".join(sorted(_FUNCTIONS)) + "; constants " + ", ".join(sorted(_CONSTANTS))


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError(f"result too large: more than {MAX_INT_BITS} bits (about 3000 digits)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent` with the result size estimated before computing it."""
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent * (abs(base).bit_length() - 1) > MAX_INT_BITS
    ):
        raise ToolError(f"result too large: {base} ** {exponent} has more than {MAX_INT_BITS} bits")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolError(f"({base}) ** {exponent} is not a real number")
    return result


def _call_function(name: str, args: list[Number]) -> Number:
    if name == "factorial" and args and isinstance(args[0], int) and args[0] > MAX_FACTORIAL:
        raise ToolError(f"factorial argument too large: {args[0]} (at most {MAX_FACTORIAL})")
    if name == "comb" and any(isinstance(a, int) and a > MAX_COMB_N for a in args):
        raise ToolError(f"comb arguments too large (at most {MAX_COMB_N})")
    if name == "perm" and any(isinstance(a, int) and a > MAX_FACTORIAL for a in args):
        raise ToolError(f"perm arguments too large (at most {MAX_FACTORIAL})")
    if name == "round" and len(args) == 2 and isinstance(args[1], int) and abs(args[1]) > 100:
        # round(n, -10**9) would compute 10**(10**9) before rounding.
        raise ToolError("round() digits must be between -100 and 100")
    if name == "pow" and len(args) == 2:
        args = [float(args[0]), float(args[1])]  # math.pow is float pow; keep it bounded
    return _FUNCTIONS[name](*args)


class _Evaluator:
    """Walks a parsed expression; each visit returns an int or a float."""

    def eval(self, node: ast.AST, depth: int = 0) -> Number:
        if depth > MAX_DEPTH:
            raise ToolError(f"expression too complex (more than {MAX_DEPTH} nested operations)")
        if isinstance(node, ast.Expression):
            return self.eval(node.body, depth + 1)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ToolError(f"only numbers are allowed, got {value!r}")
            return _check_size(value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left = self.eval(node.left, depth + 1)
            right = self.eval(node.right, depth + 1)
            if isinstance(node.op, ast.Pow):
                return _check_size(_power(left, right))
            return _check_size(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.eval(node.operand, depth + 1))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            if node.id in _FUNCTIONS:
                raise ToolError(f"{node.id} is a function: call it, e.g. {node.id}(2)")
            raise ToolError(f"unknown name {node.id!r}; allowed: {_allowed_names()}")
        if isinstance(node, ast.Call):
            name = self._function_name(node.func)
            if node.keywords:
                raise ToolError(f"{name}() takes positional arguments only")
            if any(isinstance(a, ast.Starred) for a in node.args):
                raise ToolError("argument unpacking is not allowed")
            args = [self.eval(a, depth + 1) for a in node.args]
            return _check_size(_call_function(name, args))
        if isinstance(node, ast.Attribute):
            # `math.sqrt(2)` is how models often spell it; `math.pi` likewise.
            name = self._math_attribute(node)
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            raise ToolError(f"{name} is a function: call it, e.g. {name}(2)")
        what = _NODE_WORDS.get(type(node), type(node).__name__)
        raise ToolError(
            f"unsupported syntax: {what} is not allowed; use numbers, + - * / // % ** ( ) "
            f"and {_allowed_names()}"
        )

    def _function_name(self, func: ast.expr) -> str:
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute):
            name = self._math_attribute(func)
        else:
            raise ToolError("only named math functions can be called, e.g. sqrt(2)")
        if name not in _FUNCTIONS:
            raise ToolError(f"unknown function {name!r}; allowed: {_allowed_names()}")
        return name

    @staticmethod
    def _math_attribute(node: ast.Attribute) -> str:
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == "math"
            and (node.attr in _FUNCTIONS or node.attr in _CONSTANTS)
        ):
            return node.attr
        raise ToolError(
            "unsupported syntax: attribute access is not allowed "
            f"(only math.<function> for {_allowed_names()})"
        )


def format_number(value: Number) -> str:
    """Ints as ints; floats without float noise (0.1+0.2 -> 0.3, 1/3 keeps its digits)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    short = float(f"{value:.15g}")
    # Accept the 15-digit form only within 2 ulps: that much is representation noise.
    if abs(short - value) <= 2 * math.ulp(value):
        if short.is_integer() and abs(short) < 1e16:
            return str(int(short))
        return repr(short)
    return repr(value)


def _caret_as_power(text: str) -> str:
    """`2^10-1` as `2**10-1`: people and models write `^` for a power, never for xor.

    Rewriting the text (rather than mapping the xor node to a power) gives `^` the
    precedence and right-associativity of `**`: `2^10-1` is 1023, `2^3^2` is 512 and
    `-2^2` is -4, as on any calculator. The grammar has no strings, so every `^` is an
    operator.
    """
    return text.replace("^", "**")


def evaluate(expression: str) -> str:
    """Evaluate an expression and return the formatted result, or raise ToolError."""
    text = expression.strip()
    if not text:
        raise ToolError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolError(
            f"expression too long: {len(text)} characters (at most {MAX_EXPRESSION_CHARS})"
        )
    try:
        tree = ast.parse(_caret_as_power(text), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"cannot parse {text!r}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ToolError(f"cannot parse {text!r}: too complex") from None
    try:
        value = _Evaluator().eval(tree)
    except ZeroDivisionError:
        raise ToolError(f"division by zero in {text!r}") from None
    except OverflowError:
        raise ToolError(f"result too large in {text!r}") from None
    except (ValueError, TypeError) as exc:
        raise ToolError(f"cannot evaluate {text!r}: {exc}") from None
    return format_number(value)


def calculator_tool() -> Tool:
    """The built-in calculator."""
    return Tool(
        name="calculator",
        description=(
            "Evaluate an arithmetic expression exactly: + - * / // % ** (or ^) and "
            "parentheses, math functions (sqrt, log, exp, sin, cos, tan, factorial, "
            "comb, gcd, round, ...) and constants pi, e, tau. Use it for any calculation "
            "instead of computing in your head."
        ),
        parameters={
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "the expression, e.g. '(3 + 4) * sqrt(2) / 5'",
                }
            },
            "required": ["expression"],
            "additionalProperties": False,
        },
        handler=lambda args: evaluate(args["expression"]),
        examples=(
            "what is 15% of 240?",
            "calculate 5 + 5",
            "square root of 2 times pi",
            "how many ways to choose 3 of 10",
        ),
        core=True,
        group="math",
    )
