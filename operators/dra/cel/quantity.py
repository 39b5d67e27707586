"""The Kubernetes quantity library of CEL: ``quantity()``, ``isQuantity()`` and the Quantity methods.

Comparisons and equality are by value and reuse :class:`operators.dra.quantity.Quantity`. Three
functions, however, expose how apimachinery *stores* a quantity rather than its value, so a faithful
selector has to model that storage too:

* ``isInteger()`` / ``asInteger()`` succeed only for the compact ``int64 * 10**scale`` form with a
  scale of zero or more. ``quantity("1.0")`` and ``quantity("1000m")`` are whole numbers, yet
  Kubernetes answers ``false``, because they are stored with a negative scale;
* values parsed with too many digits, or sums that overflow int64, are stored as an arbitrary
  precision decimal instead, for which ``isInteger()`` is always ``false``;
* ``asApproximateFloat()`` multiplies the stored mantissa by a power of ten, so its rounding depends
  on the stored form, and the power of ten comes from Go's table-based ``math.Pow10``.

:class:`GoAmount` is that stored form, derived by re-implementing the observable behaviour of
``resource.ParseQuantity`` and of ``Quantity.Add``/``Sub`` (including their error messages).
The printing format (DecimalSI, BinarySI...) is not modelled: no CEL function in the DRA environment
can observe it.

One deliberate limit, the core's: exact arithmetic between quantities whose decimal exponents differ
by more than :data:`~operators.dra.quantity.MAX_EXACT_DIGITS` fails with an error instead of
expanding a power of ten with billions of digits (``quantity("1e2000000000").add(1)``); Go would try
and exhaust memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from celpy import celtypes

from operators.dra.quantity import MAX_EXACT_DIGITS, Quantity

from .errors import FunctionError, cel_function, no_overload, ordering_functions

__all__ = ["FUNCTIONS", "CelQuantity", "GoAmount", "parse_go_quantity"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NANO = -9

_FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_SUFFIX_ERROR = "unable to parse quantity's suffix"
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


def _fits_int64(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


@dataclass(frozen=True)
class GoAmount:
    """How apimachinery holds a quantity: ``unscaled * 10**exponent``, compactly or as a big decimal."""

    unscaled: int
    exponent: int
    big: bool = False

    @property
    def value(self) -> Quantity:
        return Quantity(self.unscaled, self.exponent)

    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: only the compact form with a non-negative scale converts."""
        if self.big or self.exponent < 0:
            return None
        if self.exponent == 0:
            return self.unscaled
        if self.unscaled == 0:
            return 0
        # Beyond 19 digits the product cannot fit; checking first keeps a huge exponent cheap.
        if self.exponent > 18:
            return None
        product = self.unscaled * 10**self.exponent
        return product if _fits_int64(product) else None

    def approximate_float(self) -> float:
        """``Quantity.AsApproximateFloat64``: the float mantissa times Go's ``math.Pow10(exponent)``."""
        try:
            base = float(self.unscaled)
        except OverflowError:
            base = math.inf if self.unscaled > 0 else -math.inf
        if self.exponent == 0:
            return base
        return base * _go_pow10(self.exponent)


_POSITIVE_POWERS = [float(f"1e{32 * i}") for i in range(10)]
_NEGATIVE_POWERS = [float(f"1e-{32 * i}") for i in range(11)]


def _go_pow10(exponent: int) -> float:
    """Go's ``math.Pow10``: two table lookups, so results can differ from ``10.0 ** n`` in the last bit."""
    if 0 <= exponent <= 308:
        return float(10 ** (exponent % 32)) * _POSITIVE_POWERS[exponent // 32]
    if -323 <= exponent < 0:
        return _NEGATIVE_POWERS[-exponent // 32] / float(10 ** (-exponent % 32))
    return math.inf if exponent > 0 else 0.0


def _scan(text: str) -> tuple[bool, str, str, str, bool]:
    """Split ``text`` as apimachinery does: (positive, integer digits, fraction digits, suffix, any digit)."""
    position, end, positive = 0, len(text), True
    if text[:1] in ("+", "-"):
        positive = text[0] == "+"
        position = 1
    zeros = position
    while position < end and text[position] == "0":
        position += 1
    if position >= end:
        # Only a sign and zeros: apimachinery reads a zero, even for "+" or "-" alone.
        return positive, "0", "", "", True
    any_digit = position > zeros
    start = position
    while position < end and text[position] in _DIGITS:
        position += 1
    whole = text[start:position] or "0"
    fraction = ""
    if position < end and text[position] == ".":
        position += 1
        start = position
        while position < end and text[position] in _DIGITS:
            position += 1
        fraction = text[start:position]
    any_digit = any_digit or whole != "0" or bool(fraction)
    suffix_start = position
    while position < end and text[position] in _SUFFIX_CHARS:
        position += 1
    if position < end and text[position] in ("+", "-"):
        position += 1
    while position < end and text[position] in _DIGITS:
        position += 1
    if position < end:
        raise FunctionError(_FORMAT_ERROR)
    return positive, whole, fraction, text[suffix_start:], any_digit


def _interpret_suffix(suffix: str) -> tuple[int, int, bool]:
    """(base, exponent, binary) of a suffix; an ``e``-exponent wraps to int32 as in Go."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], False
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if not body or not set(body) <= _DIGITS or not _fits_int64(int(digits)):
            raise FunctionError(_SUFFIX_ERROR)
        exponent = (int(digits) + 2**31) % 2**32 - 2**31
        return 10, exponent, False
    raise FunctionError(_SUFFIX_ERROR)


def parse_go_quantity(text: str) -> GoAmount:
    """``resource.ParseQuantity``: the value and its stored form, or FunctionError with Go's message."""
    if not text:
        raise FunctionError(_FORMAT_ERROR)
    if text == "0":
        return GoAmount(0, 0)
    positive, whole, fraction, suffix, any_digit = _scan(text)
    base, exponent, binary = _interpret_suffix(suffix)
    digits = len(whole) + len(fraction)
    if binary:
        multiplier = 1 << exponent
        scale = 0
        # apimachinery's estimate of the decimal digits a binary suffix adds (float32 arithmetic).
        precision = 15 - len(whole) - int(exponent * 3 / 10) - 1 if not fraction else -1
    else:
        multiplier = 1
        scale = exponent
        precision = 18 - digits
    if precision >= 0:
        scale -= len(fraction)
        if scale >= _NANO:
            compact = int(whole + fraction) * multiplier
            if _fits_int64(compact):
                return GoAmount(compact if positive else -compact, scale)
    if not any_digit:
        # The exact path parses the number text itself, and "." alone is not a number.
        raise FunctionError("unable to parse numeric part of quantity")
    return _parse_big(positive, whole, fraction, base, exponent, binary)


def _parse_big(positive: bool, whole: str, fraction: str, base: int, exponent: int, binary: bool) -> GoAmount:
    """The arbitrary-precision path: exact value, rounded away from zero to whole nano units."""
    mantissa = int(whole + fraction)
    if mantissa == 0:
        # Checked first so that a huge exponent on a zero is never expanded.
        return GoAmount(0, exponent - len(fraction) if base == 10 else -len(fraction), big=True)
    if base == 10 and exponent > MAX_EXACT_DIGITS:
        raise FunctionError("quantity exponent is too large to evaluate")
    if base == 10 and exponent + len(whole) < _NANO - 1:
        # Far below one nano unit: the result is the smallest unit, without expanding 10**-exponent.
        return GoAmount(1 if positive else -1, _NANO, big=True)
    magnitude = Fraction(mantissa, 10 ** len(fraction))
    magnitude *= Fraction(base) ** exponent
    nanos = -(-magnitude.numerator * 10**9 // magnitude.denominator)
    if binary and nanos > _INT64_MAX * 10**9:
        # Go caps binary quantities at the int64 maximum, stored with scale zero.
        return GoAmount(_INT64_MAX if positive else -_INT64_MAX, 0, big=True)
    return GoAmount(nanos if positive else -nanos, _NANO, big=True)


def _combine(left: GoAmount, right: GoAmount, sign: int) -> GoAmount:
    """``Quantity.Add`` (sign 1) or ``Sub`` (sign -1): compact while int64 allows, else exact decimals."""
    if not left.big and not right.big:
        # Go negates the compact int64 in place, so the most negative value stays itself.
        other = right.unscaled if sign > 0 or right.unscaled == _INT64_MIN else -right.unscaled
        if other == 0:
            return left
        if left.unscaled == 0:
            return GoAmount(other, right.exponent)
        low = min(left.exponent, right.exponent)
        if max(left.exponent, right.exponent) - low <= 18:
            a = left.unscaled * 10 ** (left.exponent - low)
            b = other * 10 ** (right.exponent - low)
            if _fits_int64(a) and _fits_int64(b) and _fits_int64(a + b):
                return GoAmount(a + b, low)
    low = min(left.exponent, right.exponent)
    if max(left.exponent, right.exponent) - low > MAX_EXACT_DIGITS:
        raise FunctionError("quantity arithmetic between such different magnitudes is not supported")
    total = left.unscaled * 10 ** (left.exponent - low) + sign * right.unscaled * 10 ** (right.exponent - low)
    return GoAmount(total, low, big=True)


class CelQuantity:
    """A CEL value of type ``kubernetes.Quantity``."""

    __slots__ = ("amount",)

    def __init__(self, amount: GoAmount) -> None:
        self.amount = amount

    @classmethod
    def parse(cls, text: str) -> CelQuantity:
        return cls(parse_go_quantity(text))

    @property
    def value(self) -> Quantity:
        return self.amount.value

    def compare(self, other: CelQuantity) -> int:
        return self.value.cmp(other.value)

    def __repr__(self) -> str:
        return f"CelQuantity({self.value})"


def _quantity_arg(function: str, *args: Any) -> tuple[CelQuantity, ...]:
    if not all(isinstance(arg, CelQuantity) for arg in args):
        raise no_overload(function, *args)
    return args


@cel_function
def quantity(text: Any) -> CelQuantity:
    if not isinstance(text, str):
        raise no_overload("quantity", text)
    return CelQuantity.parse(text)


@cel_function
def is_quantity(text: Any) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise no_overload("isQuantity", text)
    try:
        parse_go_quantity(text)
    except FunctionError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


@cel_function
def sign(value: Any) -> celtypes.IntType:
    (q,) = _quantity_arg("sign", value)
    return celtypes.IntType(q.value.sign())


@cel_function
def is_integer(value: Any) -> celtypes.BoolType:
    (q,) = _quantity_arg("isInteger", value)
    return celtypes.BoolType(q.amount.as_int64() is not None)


@cel_function
def as_integer(value: Any) -> celtypes.IntType:
    (q,) = _quantity_arg("asInteger", value)
    number = q.amount.as_int64()
    if number is None:
        raise FunctionError("cannot convert value to integer")
    return celtypes.IntType(number)


@cel_function
def as_approximate_float(value: Any) -> celtypes.DoubleType:
    (q,) = _quantity_arg("asApproximateFloat", value)
    return celtypes.DoubleType(q.amount.approximate_float())


def _operand(function: str, receiver: Any, other: Any) -> tuple[CelQuantity, GoAmount]:
    if isinstance(receiver, CelQuantity):
        if isinstance(other, CelQuantity):
            return receiver, other.amount
        if isinstance(other, celtypes.IntType) and not isinstance(other, celtypes.BoolType):
            # An int operand is NewQuantity(i, DecimalExponent): compact, scale zero.
            return receiver, GoAmount(int(other), 0)
    raise no_overload(function, receiver, other)


@cel_function
def add(receiver: Any, other: Any) -> CelQuantity:
    q, amount = _operand("add", receiver, other)
    return CelQuantity(_combine(q.amount, amount, 1))


@cel_function
def sub(receiver: Any, other: Any) -> CelQuantity:
    q, amount = _operand("sub", receiver, other)
    return CelQuantity(_combine(q.amount, amount, -1))


# compareTo, isGreaterThan and isLessThan are shared with semver; program.py dispatches on the receiver.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": sign,
    "isInteger": is_integer,
    "asInteger": as_integer,
    "asApproximateFloat": as_approximate_float,
    "add": add,
    "sub": sub,
    **ordering_functions(CelQuantity),
}
