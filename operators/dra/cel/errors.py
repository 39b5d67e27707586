"""Errors of the DRA CEL environment, as callers see them and as CEL functions raise them.

Callers catch one family::

    CelError (ValueError)            any problem with one expression; ``expression`` and ``detail``
    ├── CelCompileError              the text does not parse, or names something the DRA environment
    │                                does not declare (Kubernetes rejects both at admission)
    └── CelEvaluationError           evaluation failed for one device: a missing map key, a type
                                     mismatch, an overflow, a result that is not a bool, or the
                                     evaluation exceeded its cost limit

Inside the interpreter an error is a *value*: cel-python passes a ``CELEvalError`` along so that
``false && <error>`` can still be ``false``, exactly as CEL's commutative logical operators require.
The library functions therefore never let a Python exception escape; they raise
:class:`FunctionError` and the :func:`cel_function` wrapper turns it into such a value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from celpy import celtypes
from celpy.evaluation import CELEvalError

__all__ = [
    "CelCompileError",
    "CelError",
    "CelEvaluationError",
    "FunctionError",
    "cel_function",
    "error_value",
    "no_overload",
    "ordering_functions",
]


class CelError(ValueError):
    """A CEL expression could not be used; ``str()`` is the detail alone, without the expression."""

    def __init__(self, expression: str, detail: str) -> None:
        super().__init__(detail)
        self.expression = expression
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class CelCompileError(CelError):
    """The expression does not compile in the DRA CEL environment."""


class CelEvaluationError(CelError):
    """The expression compiled but failed while evaluating it for one device."""


class FunctionError(Exception):
    """Raised by a library function; becomes a CEL error value with this message."""


def no_overload(function: str, *args: Any) -> FunctionError:
    """cel-go's wording for a call whose argument types no overload accepts."""
    from .values import type_name  # values imports this module; a late import avoids the cycle

    kinds = ", ".join(type_name(arg) for arg in args)
    return FunctionError(f"found no matching overload for '{function}' applied to '({kinds})'")


def error_value(message: str) -> CELEvalError:
    return CELEvalError(message)


F = TypeVar("F", bound=Callable[..., Any])


def cel_function(function: F) -> F:
    """Give a Python function CEL call semantics: error arguments propagate, failures become values."""

    @functools.wraps(function)
    def wrapper(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        try:
            return function(*args)
        except FunctionError as error:
            return CELEvalError(str(error))
        except RecursionError:
            return CELEvalError("expression nests too deeply")

    return wrapper  # type: ignore[return-value]


class Ordered(Protocol):
    def compare(self, other: Any, /) -> int: ...


def ordering_functions(kind: type[Ordered]) -> dict[str, Callable[..., Any]]:
    """``compareTo``, ``isGreaterThan`` and ``isLessThan`` of Kubernetes' Quantity and Semver
    libraries: both operands must be of ``kind``, which orders them."""

    def operands(function: str, left: Any, right: Any) -> tuple[Ordered, Ordered]:
        if not isinstance(left, kind) or not isinstance(right, kind):
            raise no_overload(function, left, right)
        return left, right

    @cel_function
    def compare_to(receiver: Any, other: Any) -> celtypes.IntType:
        left, right = operands("compareTo", receiver, other)
        return celtypes.IntType(left.compare(right))

    @cel_function
    def is_greater_than(receiver: Any, other: Any) -> celtypes.BoolType:
        left, right = operands("isGreaterThan", receiver, other)
        return celtypes.BoolType(left.compare(right) > 0)

    @cel_function
    def is_less_than(receiver: Any, other: Any) -> celtypes.BoolType:
        left, right = operands("isLessThan", receiver, other)
        return celtypes.BoolType(left.compare(right) < 0)

    return {"compareTo": compare_to, "isGreaterThan": is_greater_than, "isLessThan": is_less_than}
