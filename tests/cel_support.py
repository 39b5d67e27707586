"""What the CEL test modules ask of an expression: its value, its evaluation error, its compile error."""

from __future__ import annotations

from typing import Any

import pytest

from operators.dra.cel import CelCompileError, CelEvaluationError, compile_expression


def value(expression: str) -> Any:
    """The result of evaluating ``expression`` without a device."""
    return compile_expression(expression).evaluate()


def fails(expression: str) -> str:
    """The detail of the error evaluating ``expression`` raises."""
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(expression).evaluate()
    return caught.value.detail


def rejected(expression: str) -> str:
    """The detail of the error compiling ``expression`` raises."""
    with pytest.raises(CelCompileError) as caught:
        compile_expression(expression)
    return caught.value.detail
