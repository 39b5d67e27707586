"""Kubernetes ``resource.Quantity``: parsing, exact arithmetic and the canonical string.

Status fields must read exactly as the API server would print them (``80Gi``, never
``85899345920``), and cost comparisons must compare values, not spellings (``40Gi`` equals
``42949672960``). No Python library does both, so this module reproduces apimachinery's
semantics once for every operator.

Design:

* A value is an exact decimal ``coefficient * 10**exponent`` kept normalised (the
  coefficient has no trailing zeros), so equal values have equal representations and
  hashing by value is trivial. Parsing ``1e2147483647`` stays cheap because the power of
  ten is never expanded: comparisons look at orders of magnitude first, and printing
  writes the exponent.
* Every operation takes time bounded by the digits it is given, never by an exponent.
  Aligning the operands of a sum or difference on the smaller exponent may widen them to
  :data:`MAX_EXACT_DIGITS` digits (or to the longer coefficient given), no further; beyond,
  :class:`QuantityRangeError` says so instead of expanding ``10**2147483647``, which in Go
  takes hours and gigabytes. A driver may publish such values (the API accepts any quantity
  it can parse), so callers report the error as a property of the data, never as a failure
  to retry.
* Python's ``int``/``str`` conversions refuse more than 4300 digits (a process-wide
  setting that is not ours to change); longer digit strings go through ``decimal``.
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

import decimal
import enum
import math
import re
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["MAX_EXACT_DIGITS", "Format", "Quantity", "QuantityError", "QuantityRangeError", "parse_quantity"]

MAX_EXACT_DIGITS = 4096
"""How far exact quantity arithmetic expands a power of ten, in decimal digits (here and in
CEL's ``quantity`` library): far beyond any real amount, and well under a millisecond of work."""


class QuantityError(ValueError):
    """The string is not a valid Kubernetes quantity."""


class QuantityRangeError(OverflowError):
    """An exact sum or difference would expand its operands beyond :data:`MAX_EXACT_DIGITS` digits."""


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
# Below Python's smallest possible int/str conversion limit (640 digits), whatever the process set.
_STR_SAFE_DIGITS = 600
_STR_SAFE = 10**_STR_SAFE_DIGITS


def _normalise(coefficient: int, exponent: int) -> tuple[int, int]:
    if coefficient == 0:
        return 0, 0
    # Each factor of ten needs a factor of two, and the binary form counts those for free:
    # most coefficients are odd and end here.
    bound = (coefficient & -coefficient).bit_length() - 1
    zeros, step = 0, 1
    # Strip 1, 2, 4... zeros while they divide, then the rest by halving steps: a few
    # big divisions instead of one per zero.
    while step <= bound - zeros:
        quotient, remainder = divmod(coefficient, 10**step)
        if remainder:
            break
        coefficient, zeros, step = quotient, zeros + step, step * 2
    while step > 1:
        step //= 2
        if step <= bound - zeros:
            quotient, remainder = divmod(coefficient, 10**step)
            if not remainder:
                coefficient, zeros = quotient, zeros + step
    return coefficient, exponent + zeros


def _digit_count(magnitude: int) -> int:
    """The decimal digits of ``magnitude`` > 0."""
    if magnitude < _STR_SAFE:
        return len(str(magnitude))
    # The float logarithm may be one off next to a power of ten; one exact comparison settles it.
    digits = int(math.log10(magnitude)) + 1
    power = 10 ** (digits - 1)
    if magnitude < power:
        return digits - 1
    return digits + 1 if magnitude >= power * 10 else digits


def _int_text(value: int) -> str:
    if -_STR_SAFE < value < _STR_SAFE:
        return str(value)
    return str(decimal.Decimal(value))


def _int_from_digits(digits: str) -> int:
    return int(digits) if len(digits) <= _STR_SAFE_DIGITS else int(decimal.Decimal(digits))


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
        """The exact value; QuantityRangeError when its power of ten is beyond :data:`MAX_EXACT_DIGITS`."""
        if abs(self._exponent) > MAX_EXACT_DIGITS:
            raise QuantityRangeError(f"the exact value needs more than {MAX_EXACT_DIGITS} digits")
        if self._exponent >= 0:
            return Fraction(self._coefficient * 10**self._exponent)
        return Fraction(self._coefficient, 10**-self._exponent)

    def _digits(self) -> int:
        """The digits of the coefficient (self non-zero)."""
        return _digit_count(abs(self._coefficient))

    def _magnitude(self) -> int:
        """The position of the leading digit: ``10**(m-1) <= |self| < 10**m`` (self non-zero)."""
        return self._digits() + self._exponent

    # Arithmetic -------------------------------------------------------------------

    def _result_format(self, other: Quantity) -> Format:
        return other.format if self.is_zero() else self.format

    def _aligned(self, other: Quantity) -> tuple[int, int, int]:
        exponent = min(self._exponent, other._exponent)
        mine = self._coefficient * 10 ** (self._exponent - exponent)
        theirs = other._coefficient * 10 ** (other._exponent - exponent)
        return mine, theirs, exponent

    def _combine(self, other: Quantity, sign: int) -> Quantity:
        fmt = self._result_format(other)
        # A zero's exponent says nothing (it is 0), so aligning on it could expand any power of ten.
        if other.is_zero():
            return Quantity(self._coefficient, self._exponent, fmt)
        if self.is_zero():
            return Quantity(sign * other._coefficient, other._exponent, fmt)
        my_digits, their_digits = self._digits(), other._digits()
        aligned = max(my_digits + self._exponent, their_digits + other._exponent) - min(
            self._exponent, other._exponent
        )
        # Only widening costs: the digits operands already have were paid for when parsed. As
        # each result is an operand of the next, a chain of sums stays within bounds (plus carries).
        if aligned > max(MAX_EXACT_DIGITS, my_digits, their_digits):
            operation = "sum" if sign > 0 else "difference"
            raise QuantityRangeError(
                f"the exact {operation} needs {aligned} digits, more than {MAX_EXACT_DIGITS}"
            )
        mine, theirs, exponent = self._aligned(other)
        return Quantity(mine + sign * theirs, exponent, fmt)

    def __add__(self, other: Quantity) -> Quantity:
        """The exact sum; QuantityRangeError beyond :data:`MAX_EXACT_DIGITS` digits."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._combine(other, 1)

    def __sub__(self, other: Quantity) -> Quantity:
        """The exact difference; QuantityRangeError beyond :data:`MAX_EXACT_DIGITS` digits."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._combine(other, -1)

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
        # Compare orders of magnitude first so that huge exponents are never expanded: when
        # they are equal, aligning adds no more digits than the operands already have.
        my_magnitude = self._magnitude()
        their_magnitude = other._magnitude()
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
            # From 10**4 on, no need to expand the value to know it is at least 1024.
            if self._exponent >= 4 or (self._exponent >= 0 and magnitude * 10**self._exponent >= 1024):
                return sign + _binary_text(magnitude, self._exponent)
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


def _binary_text(coefficient: int, exponent: int) -> str:
    if exponent >= 60:
        # 10**60 holds 1024**6, so the value is a whole number of Ei: write its zeros instead
        # of expanding them.
        return f"{_int_text(coefficient * 5**60)}{'0' * (exponent - 60)}Ei"
    value = coefficient * 10**exponent
    power = 0
    # Beyond Ei there is no suffix; keep the value exact with a larger mantissa.
    while power < len(_BINARY_SUFFIX_BY_POWER) - 1 and value % 1024 == 0:
        value //= 1024
        power += 1
    return f"{_int_text(value)}{_BINARY_SUFFIX_BY_POWER[power]}"


def _decimal_text(coefficient: int, exponent: int, fmt: Format) -> str:
    # The coefficient has no trailing zeros; move the exponent down to a multiple of 3.
    suffix_exponent = 3 * (exponent // 3)
    mantissa = coefficient * 10 ** (exponent - suffix_exponent)
    text = _int_text(mantissa)
    if fmt is Format.DECIMAL_SI and suffix_exponent in _DECIMAL_SUFFIX_BY_EXPONENT:
        return f"{text}{_DECIMAL_SUFFIX_BY_EXPONENT[suffix_exponent]}"
    # DecimalExponent, and DecimalSI magnitudes beyond "E" that have no SI suffix.
    if suffix_exponent == 0:
        return text
    return f"{text}e{suffix_exponent}"


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
    coefficient = _int_from_digits(digits) if digits else 0
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
    rounded = 1 if _digit_count(magnitude) <= excess_digits else _ceil_div(magnitude, 10**excess_digits)
    return rounded if coefficient > 0 else -rounded
