"""CEL's arithmetic operators and ``size()``, with cel-go's overloads and error messages.

cel-python implements ``+`` on two strings or two lists with Python's operator, which returns a
plain ``str``/``list`` that CEL functions then no longer recognise, and words its errors after its
parse tree. These replacements keep every result a CEL value and follow cel-go:

* operands must have the same type (``1 + 1.0`` is an error; there is no implicit conversion);
* int and uint arithmetic is checked: leaving the 64-bit range is "integer overflow";
* integer ``/`` and ``%`` truncate toward zero, as Go does, and dividing by zero is an error,
  while double division follows IEEE (``1.0 / 0.0`` is infinity);
* timestamps and durations keep cel-python's implementation.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError, function_matches

from .errors import FunctionError, cel_function, no_overload
from .values import type_name

__all__ = ["ARITHMETIC"]

_RANGES = {"int": (-(2**63), 2**63 - 1), "uint": (0, 2**64 - 1)}
_TIME = {"google.protobuf.Timestamp", "google.protobuf.Duration"}


def _checked(kind: str, value: int) -> Any:
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise FunctionError("integer overflow" if kind == "int" else "unsigned integer overflow")
    return celtypes.IntType(value) if kind == "int" else celtypes.UintType(value)


def _truncating_divide(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _integer(symbol: str, kind: str, left: int, right: int) -> Any:
    if symbol in "/%" and right == 0:
        raise FunctionError("division by zero" if symbol == "/" else "modulus by zero")
    if symbol == "+":
        return _checked(kind, left + right)
    if symbol == "-":
        return _checked(kind, left - right)
    if symbol == "*":
        return _checked(kind, left * right)
    if symbol == "%" and kind == "int" and right == -1 and left == _RANGES["int"][0]:
        # Go computes the quotient to get the remainder, and that quotient overflows.
        raise FunctionError("integer overflow")
    quotient = _truncating_divide(left, right)
    return _checked(kind, quotient if symbol == "/" else left - right * quotient)


def _double(symbol: str, left: float, right: float) -> Any:
    if symbol == "/":
        if right == 0:
            # IEEE division, which Python refuses; the sign of the zero counts.
            if left == 0 or math.isnan(left):
                return celtypes.DoubleType(math.nan)
            negative = (left < 0) != (math.copysign(1.0, right) < 0)
            return celtypes.DoubleType(-math.inf if negative else math.inf)
        return celtypes.DoubleType(left / right)
    if symbol == "%":
        raise no_overload("_%_", celtypes.DoubleType(left), celtypes.DoubleType(right))
    return celtypes.DoubleType({"+": operator.add, "-": operator.sub, "*": operator.mul}[symbol](left, right))


def _operator(symbol: str, fallback: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    name = f"_{symbol}_"

    @cel_function
    def apply(left: Any, right: Any) -> Any:
        kind, other = type_name(left), type_name(right)
        if kind == other and kind in _RANGES:
            return _integer(symbol, kind, int(left), int(right))
        if kind == other == "double":
            return _double(symbol, float(left), float(right))
        if symbol == "+" and kind == other == "string":
            return celtypes.StringType(str(left) + str(right))
        if symbol == "+" and kind == other == "bytes":
            return celtypes.BytesType(bytes(left) + bytes(right))
        if symbol == "+" and kind == other == "list":
            return celtypes.ListType([*left, *right])
        if symbol in "+-" and kind in _TIME and other in _TIME:
            try:
                return fallback(left, right)
            except (TypeError, ValueError, OverflowError) as error:
                raise FunctionError(f"{name} failed for ({kind}, {other}): {error}") from None
        raise no_overload(name, left, right)

    return apply


@cel_function
def _not(value: Any) -> celtypes.BoolType:
    if not isinstance(value, celtypes.BoolType):
        raise no_overload("!_", value)
    return celtypes.BoolType(not value)


@cel_function
def _negate(value: Any) -> Any:
    kind = type_name(value)
    if kind == "int":
        return _checked("int", -int(value))
    if kind == "double":
        return celtypes.DoubleType(-float(value))
    raise no_overload("-_", value)


@cel_function
def matches(text: Any, pattern: Any) -> Any:
    """RE2, unanchored, as in cel-go: cel-python's implementation uses the same engine."""
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise no_overload("matches", text, pattern)
    result = function_matches(text, pattern)
    if isinstance(result, CELEvalError):
        raise FunctionError(f"invalid regular expression {str(pattern)!r}")
    return result


def _conversion(name: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """cel-python's type conversions, with cel-go's message instead of "return error for overflow"."""

    @cel_function
    def apply(value: Any) -> Any:
        try:
            return convert(value)
        except (ValueError, TypeError, OverflowError):
            raise FunctionError(f"type conversion error from '{type_name(value)}' to '{name}'") from None

    return apply


@cel_function
def size(value: Any) -> celtypes.IntType:
    if isinstance(value, (str, bytes, celtypes.ListType, celtypes.MapType)):
        return celtypes.IntType(len(value))
    raise no_overload("size", value)


ARITHMETIC: dict[str, Callable[..., Any]] = {
    "_+_": _operator("+", operator.add),
    "_-_": _operator("-", operator.sub),
    "_*_": _operator("*", operator.mul),
    "_/_": _operator("/", operator.truediv),
    "_%_": _operator("%", operator.mod),
    "size": size,
    "!_": _not,
    "-_": _negate,
    "matches": matches,
    **{
        name: _conversion(name, kind)
        for name, kind in {
            "int": celtypes.IntType,
            "uint": celtypes.UintType,
            "double": celtypes.DoubleType,
            "bool": celtypes.BoolType,
            "bytes": celtypes.BytesType,
            "duration": celtypes.DurationType,
            "timestamp": celtypes.TimestampType,
        }.items()
    },
}
