"""CEL value semantics that cel-python leaves out or reads differently from cel-go.

Kubernetes evaluates selectors with cel-go, whose *runtime* rules differ from cel-python's in ways a
selector can observe:

* heterogeneous equality: ``1 == 'a'`` is ``false`` (cel-python: an error), ``1 == 1.0`` and
  ``1u == 1`` compare numerically; a Quantity or Semver on the left of ``==`` with anything but its
  own type is an error (their ``Equal`` has no other overload), on the right it is simply unequal;
* cross-type numeric ordering (``1 < 1.5``), which Kubernetes enables, and ``NaN`` refusing to be
  ordered;
* ``in`` over a list uses that equality and never fails on a type mismatch;
* a double prints as Go's ``strconv.FormatFloat(f, 'g', -1, 64)`` (``100`` and ``1e+06``).

The operator functions here replace cel-python's ``_==_``, ``_<_``... in the function table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, cast

from celpy import celtypes

from .errors import FunctionError, cel_function, no_overload
from .quantity import CelQuantity
from .semver import CelSemver

__all__ = ["OPERATORS", "DefaultMap", "compare", "equals", "go_format_double", "type_name"]


class DefaultMap(celtypes.MapType):
    """A map whose missing keys read as an empty map, as Kubernetes serves ``device.attributes``.

    Only lookups default: ``size()``, ``in`` and iteration see the real keys, so
    ``device.attributes["other.example.com"].model`` fails with "no such key: model" while
    ``"other.example.com" in device.attributes`` is ``false``.
    """

    def __missing__(self, key: Any) -> celtypes.MapType:
        return celtypes.MapType()


# Checked in order: bool before int (both are Python ints), uint before int (a subclass).
_TYPE_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((celtypes.BoolType, bool), "bool"),
    (celtypes.UintType, "uint"),
    (int, "int"),
    (float, "double"),
    (str, "string"),
    (bytes, "bytes"),
    (list, "list"),
    (dict, "map"),
    (celtypes.TimestampType, "google.protobuf.Timestamp"),
    (celtypes.DurationType, "google.protobuf.Duration"),
    (CelQuantity, "kubernetes.Quantity"),
    (CelSemver, "kubernetes.Semver"),
    (type, "type"),
)


def type_name(value: Any) -> str:
    """The CEL name of a value's type, for error messages and same-type checks."""
    if value is None or isinstance(value, celtypes.NullType):
        return "null_type"
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)) and not isinstance(
        value, celtypes.BoolType
    )


_INT64_MIN_FLOAT = float(-(2**63))
_INT64_MAX_FLOAT = float(2**63)  # Go's float64(math.MaxInt64) rounds up to 2**63
_UINT64_MAX_FLOAT = float(2**64)


def _sign(left: Any, right: Any) -> int:
    return int(left > right) - int(left < right)


def _compare_numbers(left: Any, right: Any) -> int:
    """cel-go's cross-type numeric comparison; an int meets a double as a double, after range checks."""
    left_double = isinstance(left, celtypes.DoubleType)
    right_double = isinstance(right, celtypes.DoubleType)
    if left_double == right_double:
        # Plain Python numbers: cel-python's own int types refuse to compare int with uint.
        return _sign(float(left), float(right)) if left_double else _sign(int(left), int(right))
    double, integer, flip = (left, right, 1) if left_double else (right, left, -1)
    if isinstance(integer, celtypes.UintType):
        low, high = 0.0, _UINT64_MAX_FLOAT
    else:
        low, high = _INT64_MIN_FLOAT, _INT64_MAX_FLOAT
    if double < low:
        result = -1
    elif double > high:
        result = 1
    else:
        result = _sign(double, float(integer))
    return result * flip


def equals(left: Any, right: Any) -> bool:
    """cel-go's runtime ``==``; raises FunctionError where cel-go returns an error."""
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, (CelQuantity, CelSemver)):
        if isinstance(left, CelQuantity) and isinstance(right, CelQuantity):
            return left.compare(right) == 0
        if isinstance(left, CelSemver) and isinstance(right, CelSemver):
            return left.compare(right) == 0
        raise no_overload("_==_", left, right)
    if _is_number(left) and _is_number(right):
        if any(isinstance(v, float) and math.isnan(v) for v in (left, right)):
            return False
        if isinstance(left, celtypes.DoubleType) or isinstance(right, celtypes.DoubleType):
            return _compare_numbers(left, right) == 0
        return int(left) == int(right)
    if type_name(left) != type_name(right):
        return False
    if isinstance(left, celtypes.ListType):
        return len(left) == len(right) and all(equals(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, celtypes.MapType):
        if len(left) != len(right) or set(left) != set(right):
            return False
        return all(equals(left[key], right[key]) for key in left)
    return bool(left == right)


_ORDERED = (
    celtypes.StringType,
    celtypes.BytesType,
    celtypes.BoolType,
    celtypes.TimestampType,
    celtypes.DurationType,
)


def compare(left: Any, right: Any, function: str = "_<_") -> int:
    """cel-go's ``Compare``: -1, 0 or 1, or FunctionError for values that cannot be ordered."""
    if _is_number(left) and _is_number(right):
        if any(isinstance(v, float) and math.isnan(v) for v in (left, right)):
            raise FunctionError("NaN values cannot be ordered")
        return _compare_numbers(left, right)
    for kind in _ORDERED:
        if isinstance(left, kind) and isinstance(right, kind) and type_name(left) == type_name(right):
            return _sign(left, right)
    raise no_overload(function, left, right)


def _relation(name: str, test: Callable[[int], bool]) -> Callable[[Any, Any], Any]:
    @cel_function
    def relation(left: Any, right: Any) -> celtypes.BoolType:
        return celtypes.BoolType(test(compare(left, right, name)))

    relation.__name__ = name
    return relation


@cel_function
def _equal(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(equals(left, right))


@cel_function
def _not_equal(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(not equals(left, right))


@cel_function
def _in(element: Any, container: Any) -> celtypes.BoolType:
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(any(_safe_equals(element, item) for item in container))
    if isinstance(container, celtypes.MapType):
        # dict.__contains__ never consults DefaultMap.__missing__: only real keys count.
        return celtypes.BoolType(celtypes.MapType.valid_key_type(element) and element in container)
    raise no_overload("@in", element, container)


def _safe_equals(left: Any, right: Any) -> bool:
    try:
        return equals(left, right)
    except FunctionError:
        return False


def go_format_double(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 64)``, which CEL uses for ``string(double)``.

    Both Python's ``repr`` and Go pick the shortest digits that read back as the same double; Go
    then switches to exponent notation when the decimal exponent is below -4 or at least 6.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # the value is 0.<digits> * 10**point
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        power = point - 1
        return f"{sign}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


@cel_function
def _string(value: Any) -> Any:
    """``string()``: only the conversions CEL declares, doubles printed the way Go prints them."""
    if isinstance(value, celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, celtypes.DoubleType):
        return celtypes.StringType(go_format_double(float(value)))
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return celtypes.StringType(str(int(value)))
    if isinstance(value, bytes):
        try:
            return celtypes.StringType(bytes(value).decode("utf-8"))
        except UnicodeDecodeError:
            raise FunctionError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, (str, celtypes.TimestampType, celtypes.DurationType)):
        # cel-python already prints timestamps as RFC 3339 and durations as seconds ("3600s").
        return celtypes.StringType(cast(Any, value))
    raise FunctionError(f"type conversion error from '{type_name(value)}' to 'string'")


OPERATORS: dict[str, Callable[..., Any]] = {
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _relation("_<_", lambda result: result < 0),
    "_<=_": _relation("_<=_", lambda result: result <= 0),
    "_>_": _relation("_>_", lambda result: result > 0),
    "_>=_": _relation("_>=_", lambda result: result >= 0),
    "_in_": _in,
    "string": _string,
}
