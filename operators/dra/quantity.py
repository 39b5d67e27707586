"""Kubernetes ``resource.Quantity``: parsing, exact arithmetic and the canonical string.

Status fields must read exactly as the API server would print them (``80Gi``, never
``85899345920``), and cost comparisons must compare values, not spellings (``40Gi`` equals
``42949672960``). No Python library does both, so this module reproduces apimachinery's
semantics once for every operator.

Design:

* A value is an exact decimal ``coefficient * 10**exponent`` kept normalised (the
  coefficient has no trailing zeros), so equal values have equal representations and
  hashing by value is trivial. Parsing ``1e2000000000`` stays cheap because the power of
  ten is never expanded until arithmetic needs to align two operands.
* The *format* (DecimalSI, BinarySI, DecimalExponent) is remembered from the suffix, as
  in Go, and only affects printing. Arithmetic keeps the left operand's format unless the
  left operand is zero, which lets a sum started from zero take the format of its first
  non-zero term.
* Parsing follows the grammar of the API (stricter than Go's scanner in two corner cases:
  a bare sign or ``.`` without digits is rejected, and exponents beyond +/-(2**31 - 1) are
  rejected instead of wrapping around).
* Printing never reuses the input spelling: the API server may echo ``1E3`` verbatim, but
  every string this project writes is canonical (``1e3``).
"""

from __future__ import annotations

import enum
import re
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Format", "Quantity", "QuantityError", "parse_quantity"]


class QuantityError(ValueError):
    """The string is not a valid Kubernetes quantity."""


class Format(enum.Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_NUMBER = re.compile(r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(.*)", re.ASCII | re.DOTALL)
_EXPONENT_SUFFIX = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_INT32_MAX = 2**31 - 1
# Go caps binary quantities at the int64 maximum on parse (decimal ones are not capped).
_BINARY_MAX = 2**63 - 1
# Every non-zero parsed value is rounded away from zero to a whole number of nano units.
_NANO_EXPONENT = -9


def _normalise(coefficient: int, exponent: int) -> tuple[int, int]:
    if coefficient == 0:
        return 0, 0
    while coefficient % 10 == 0:
        coefficient //= 10
        exponent += 1
    return coefficient, exponent


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


class Quantity:
    """An immutable, exact Kubernetes quantity. ``str()`` gives the canonical form."""

    __slots__ = ("_coefficient", "_exponent", "_format")

    _coefficient: int
    _exponent: int
    _format: Format

    def __init__(self, coefficient: int = 0, exponent: int = 0, fmt: Format = Format.DECIMAL_SI) -> None:
        """The value ``coefficient * 10**exponent`` printed in format ``fmt``."""
        self._coefficient, self._exponent = _normalise(coefficient, exponent)
        self._format = fmt

    @property
    def format(self) -> Format:
        return self._format

    # Construction -----------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        return parse_quantity(text)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        return cls(value, 0, fmt)

    @classmethod
    def coerce(cls, value: Quantity | str | int) -> Quantity:
        """Accept what the API may send for a quantity: a string or a JSON integer."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise QuantityError(f"quantity must be a string or an integer, not {type(value).__name__}")
        return parse_quantity(str(value))

    # Inspection -------------------------------------------------------------------

    def is_zero(self) -> bool:
        return self._coefficient == 0

    def sign(self) -> int:
        return (self._coefficient > 0) - (self._coefficient < 0)

    def as_fraction(self) -> Fraction:
        if self._exponent >= 0:
            return Fraction(self._coefficient * 10**self._exponent)
        return Fraction(self._coefficient, 10**-self._exponent)

    # Arithmetic -------------------------------------------------------------------

    def _result_format(self, other: Quantity) -> Format:
        return other.format if self.is_zero() else self.format

    def _aligned(self, other: Quantity) -> tuple[int, int, int]:
        exponent = min(self._exponent, other._exponent)
        mine = self._coefficient * 10 ** (self._exponent - exponent)
        theirs = other._coefficient * 10 ** (other._exponent - exponent)
        return mine, theirs, exponent

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        mine, theirs, exponent = self._aligned(other)
        return Quantity(mine + theirs, exponent, self._result_format(other))

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        mine, theirs, exponent = self._aligned(other)
        return Quantity(mine - theirs, exponent, self._result_format(other))

    def __mul__(self, factor: int) -> Quantity:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity(self._coefficient * factor, self._exponent, self.format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity(-self._coefficient, self._exponent, self.format)

    def non_negative(self) -> Quantity:
        """``max(0, self)``; a clamped result is a plain zero of the same format."""
        return self if self.sign() >= 0 else Quantity(0, 0, self.format)

    # Comparison (by value; the format never matters) ------------------------------

    def cmp(self, other: Quantity) -> int:
        if self.sign() != other.sign():
            return -1 if self.sign() < other.sign() else 1
        if self.sign() == 0:
            return 0
        # Compare orders of magnitude first so that huge exponents are never expanded.
        my_magnitude = len(str(abs(self._coefficient))) + self._exponent
        their_magnitude = len(str(abs(other._coefficient))) + other._exponent
        if my_magnitude != their_magnitude:
            larger_in_size = 1 if my_magnitude > their_magnitude else -1
            return larger_in_size * self.sign()
        mine, theirs, _ = self._aligned(other)
        return (mine > theirs) - (mine < theirs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._coefficient == other._coefficient and self._exponent == other._exponent

    def __hash__(self) -> int:
        return hash((self._coefficient, self._exponent))

    def __lt__(self, other: Quantity) -> bool:
        return self.cmp(other) < 0

    def __le__(self, other: Quantity) -> bool:
        return self.cmp(other) <= 0

    def __gt__(self, other: Quantity) -> bool:
        return self.cmp(other) > 0

    def __ge__(self, other: Quantity) -> bool:
        return self.cmp(other) >= 0

    # Printing ---------------------------------------------------------------------

    def __str__(self) -> str:
        if self.is_zero():
            return "0"
        sign = "-" if self._coefficient < 0 else ""
        magnitude = abs(self._coefficient)
        fmt = self.format
        if fmt is Format.BINARY_SI:
            if self._exponent >= 0 and magnitude * 10**self._exponent >= 1024:
                return sign + _binary_text(magnitude * 10**self._exponent)
            # Below 1Ki, or fractional: a binary suffix would hide digits, so Go prints DecimalSI.
            fmt = Format.DECIMAL_SI
        return sign + _decimal_text(magnitude, self._exponent, fmt)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.format.value})"

    # pydantic integration: models may declare fields of type Quantity directly.

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.coerce,
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


def _binary_text(value: int) -> str:
    power = 0
    # Beyond Ei there is no suffix; keep the value exact with a larger mantissa.
    while power < len(_BINARY_SUFFIX_BY_POWER) - 1 and value % 1024 == 0:
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIX_BY_POWER[power]}"


def _decimal_text(coefficient: int, exponent: int, fmt: Format) -> str:
    # The coefficient has no trailing zeros; move the exponent down to a multiple of 3.
    suffix_exponent = 3 * (exponent // 3)
    mantissa = coefficient * 10 ** (exponent - suffix_exponent)
    if fmt is Format.DECIMAL_SI and suffix_exponent in _DECIMAL_SUFFIX_BY_EXPONENT:
        return f"{mantissa}{_DECIMAL_SUFFIX_BY_EXPONENT[suffix_exponent]}"
    # DecimalExponent, and DecimalSI magnitudes beyond "E" that have no SI suffix.
    if suffix_exponent == 0:
        return str(mantissa)
    return f"{mantissa}e{suffix_exponent}"


def _parse_suffix(suffix: str) -> tuple[Format, int, int]:
    """Return (format, base, exponent) for a suffix, base 10 or 2."""
    if suffix in _DECIMAL_SUFFIXES:
        return Format.DECIMAL_SI, 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return Format.BINARY_SI, 2, _BINARY_SUFFIXES[suffix]
    match = _EXPONENT_SUFFIX.fullmatch(suffix)
    if match is None:
        raise QuantityError(f"unable to parse quantity's suffix {suffix!r}")
    exponent = int(match.group(1))
    if abs(exponent) > _INT32_MAX:
        raise QuantityError(f"quantity exponent {exponent} is out of range")
    return Format.DECIMAL_EXPONENT, 10, exponent


def parse_quantity(text: str) -> Quantity:
    """Parse a quantity string as the API server does; raise QuantityError otherwise."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise QuantityError(f"quantities must match <sign><number><suffix>: {text!r}")
    sign_text, whole, fraction, fraction_only, suffix = match.groups()
    if fraction_only is not None:
        whole, fraction = "", fraction_only
    fraction = fraction or ""
    fmt, base, suffix_exponent = _parse_suffix(suffix)
    digits = (whole or "") + fraction
    coefficient = int(digits) if digits else 0
    if sign_text == "-":
        coefficient = -coefficient
    if coefficient == 0:
        return Quantity(0, 0, fmt)

    if base == 10:
        exponent = suffix_exponent - len(fraction)
        if exponent < _NANO_EXPONENT:
            coefficient = _round_away_to_nano(coefficient, _NANO_EXPONENT - exponent)
            exponent = _NANO_EXPONENT
        return Quantity(coefficient, exponent, fmt)

    exact = Fraction(coefficient * 2**suffix_exponent, 10 ** len(fraction))
    nanos = _ceil_div(abs(exact.numerator) * 10**9, exact.denominator)
    magnitude = Fraction(nanos, 10**9)
    if magnitude > _BINARY_MAX:
        nanos = _BINARY_MAX * 10**9
    elif magnitude < 1:
        # A binary suffix on a value below one would print with rounding; Go switches format.
        fmt = Format.DECIMAL_SI
    return Quantity(nanos if coefficient > 0 else -nanos, _NANO_EXPONENT, fmt)


def _round_away_to_nano(coefficient: int, excess_digits: int) -> int:
    """Divide by 10**excess_digits, rounding away from zero, without huge powers."""
    magnitude = abs(coefficient)
    # Below one nano unit, a value rounds up to the smallest representable one.
    rounded = 1 if len(str(magnitude)) <= excess_digits else _ceil_div(magnitude, 10**excess_digits)
    return rounded if coefficient > 0 else -rounded
