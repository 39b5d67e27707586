"""Kubernetes quantities: spec section 19.13 plus apimachinery's own test tables."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from operators.dra.quantity import (
    MAX_EXACT_DIGITS,
    Format,
    Quantity,
    QuantityError,
    QuantityRangeError,
    parse_quantity,
)


def q(text: str) -> Quantity:
    return parse_quantity(text)


SPEC_CANONICAL = [
    ("0", "0"),
    ("0Gi", "0"),
    ("0m", "0"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    ("1.5Gi", "1536Mi"),
    ("-1.5Gi", "-1536Mi"),
    ("1.5", "1500m"),
    ("1.08", "1080m"),
    ("100m", "100m"),
    ("0.5Ki", "512"),
    (".001Ki", "1024m"),
    (".000000000001Ki", "2n"),
    ("3.001n", "4n"),
    ("6Ki", "6Ki"),
    ("12E", "12E"),
    ("1e3", "1e3"),
    ("1E3", "1e3"),
    ("300e6", "300e6"),
    ("80e-3", "80e-3"),
    ("42949672960", "42949672960"),
]
"""Spec section 19.13: a quantity's text and its canonical form."""

APIMACHINERY_CANONICAL = [
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    ("1Ti", "1Ti"),
    ("1024Gi", "1Ti"),
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("5000m", "5"),
    ("0.5", "500m"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("1080000000n", "1080m"),
    (".001e12", "1e9"),
    ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"),
    ("00", "0"),
    ("50k", "50k"),
    ("100.035k", "100035"),
    ("1.3E+6", "1300e3"),
    ("1.1E-9", "2e-9"),
    ("0.9n", "1n"),
    ("0.00000012345", "124n"),
    ("9Ei", "9223372036854775807"),
    ("9223372036854775807Ki", "9223372036854775807"),
    ("0.5Mi", "512Ki"),
    ("100.035Ki", "102435840m"),
    ("1.", "1"),
    ("1.G", "1G"),
    ("+1Ki", "1Ki"),
    ("-1024", "-1024"),
    ("1.01E", "1010P"),
]
"""The same from apimachinery's TestQuantityParseEmit, TestQuantityString alternates and parse table."""


@pytest.mark.parametrize(("text", "canonical"), [*SPEC_CANONICAL, *APIMACHINERY_CANONICAL])
def test_canonical_strings(text: str, canonical: str) -> None:
    assert str(q(text)) == canonical


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("1Ki", Format.BINARY_SI),
        ("0Ki", Format.BINARY_SI),
        ("1k", Format.DECIMAL_SI),
        ("1E", Format.DECIMAL_SI),
        ("1E6", Format.DECIMAL_EXPONENT),
        ("0.5e-9", Format.DECIMAL_EXPONENT),
        # A binary value below one switches format, because it could not print exactly.
        (".000000000001Ki", Format.DECIMAL_SI),
        # ... but one of at least one keeps it.
        (".001Ki", Format.BINARY_SI),
    ],
)
def test_parse_remembers_format(text: str, fmt: Format) -> None:
    assert q(text).format is fmt


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "1K",
        "0.1mi",
        "1i",
        "1.1.M",
        "aoeu",
        "-3.01e-",
        "1e4294967297",
        "1+1.0M",
        "0.1am",
        ".5i",
        "-3.01i",
        "-",
        ".",
        "1e",
        "1e3k",
        "1e1.5",
    ],
)
def test_invalid_strings_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_exponent_limit_is_int32() -> None:
    assert q("1e2147483647") > q("1E")
    with pytest.raises(QuantityError):
        parse_quantity("1e2147483648")


def test_huge_exponents_stay_cheap() -> None:
    assert str(q("1e2000000000")) == "100e1999999998"
    assert str(q("1e-2000000000")) == "1e-9"  # rounded away from zero to one nano unit
    assert q("1e2000000000") > q("9Ei")
    assert q("-1e2000000000") < q("1")


HUGE = "1e2147483647"
"""The largest exponent the API accepts: a driver may publish it as a capacity or a counter."""


def test_huge_exponents_print_compare_and_hash_without_expansion() -> None:
    # The canonical text is Go's: the exponent moves down to a multiple of 3.
    assert str(q(HUGE)) == "10e2147483646"
    assert q(HUGE) == q("10e2147483646")
    assert q("0.01e2147483647") == q("1000e2147483642")
    assert hash(q(HUGE)) == hash(q("10e2147483646"))
    assert q(HUGE) > q("9e2147483646") > q("1e5000")
    assert q("-" + HUGE) < q("-1e5000") < q("1")


@pytest.mark.parametrize(("left", "right"), [(HUGE, "1"), ("1", HUGE), ("1e5000", "1"), ("1e4096", "1")])
def test_sums_that_would_expand_beyond_the_bound_raise_range_error(left: str, right: str) -> None:
    # Returning at all is the time budget: 10**2147483647 was built one digit at a time.
    with pytest.raises(QuantityRangeError):
        q(left) + q(right)
    with pytest.raises(QuantityRangeError):
        q(left) - q(right)


def test_sums_within_the_bound_are_exact() -> None:
    widest = q(f"1e{MAX_EXACT_DIGITS - 1}") + q("1")
    assert str(widest) == "1" + "0" * (MAX_EXACT_DIGITS - 2) + "1"
    assert str(widest - q("1")) == f"1e{MAX_EXACT_DIGITS - 1}"
    assert str(q(HUGE) + q(HUGE)) == "20e2147483646"
    assert str(q(HUGE) - q("9e2147483646")) == "1e2147483646"


def test_a_zero_operand_never_aligns() -> None:
    # Zero's exponent is 0: aligning on it would expand the other operand's power of ten.
    assert str(Quantity() + q(HUGE)) == str(q(HUGE) + Quantity()) == "10e2147483646"
    assert str(Quantity() - q(HUGE)) == "-10e2147483646"
    assert (Quantity() + q(HUGE)).format is Format.DECIMAL_EXPONENT
    assert (q("0Gi") + q(HUGE) - q(HUGE)).format is Format.DECIMAL_EXPONENT


def test_more_than_4300_digits_parse_print_and_add() -> None:
    # Python's int/str conversions refuse more than 4300 digits by default.
    digits = "1" + "0" * 4999 + "1"
    value = q(digits)
    assert str(value) == digits
    assert q("1e5000") < value < q("2e5000")
    assert str(value + value) == "2" + "0" * 4999 + "2"
    assert (value - value).is_zero()
    assert str(q(f"{digits}Ki")) == "9223372036854775807"  # capped as every binary quantity
    assert str(q("0." + "0" * 4999 + "1")) == "1n"
    assert str(q("1" + "0" * 6000)) == "1e6000"


def test_binary_values_of_huge_magnitude_print_without_expansion() -> None:
    assert str(Quantity(3, 60, Format.BINARY_SI)) == f"{3 * 5**60}Ei"
    assert str(Quantity(3, 64, Format.BINARY_SI)) == f"{3 * 5**60}0000Ei"
    assert str(Quantity(3, 4, Format.BINARY_SI)) == "30000"


def test_as_fraction_refuses_a_huge_power_of_ten() -> None:
    with pytest.raises(QuantityRangeError):
        q(HUGE).as_fraction()
    assert q("1e4096").as_fraction() == 10**4096


@pytest.mark.parametrize(
    ("left", "op", "right", "expected"),
    [
        ("40Gi", "+", "40Gi", "80Gi"),
        ("80Gi", "-", "10Gi", "70Gi"),
        ("30Gi", "-", "9Gi", "21Gi"),
        ("0", "+", "1Gi", "1Gi"),
        ("1Gi", "+", "0", "1Gi"),
        ("100m", "+", "0", "100m"),
        ("0", "-", "1Gi", "-1Gi"),
        ("1Ki", "+", "1", "1025"),
        ("1Gi", "+", "500M", "1573741824"),
        ("512Mi", "+", "512Mi", "1Gi"),
        ("1k", "+", "24", "1024"),
        ("1500m", "+", "500m", "2"),
        ("4", "+", "4", "8"),
        ("8", "-", "1", "7"),
        ("10G", "-", "1G", "9G"),
    ],
)
def test_spec_arithmetic(left: str, op: str, right: str, expected: str) -> None:
    outcome = q(left) + q(right) if op == "+" else q(left) - q(right)
    assert str(outcome) == expected


def test_sum_of_three() -> None:
    assert str(q("10Gi") + q("10Gi") + q("10Gi")) == "30Gi"


def test_sum_from_zero_takes_first_non_zero_format() -> None:
    total = Quantity()
    for term in ("0", "1k", "1Ki"):
        total = total + q(term)
    assert total.format is Format.DECIMAL_SI
    assert str(total) == "2024"


def test_clamped_difference_is_zero() -> None:
    assert str((q("10Gi") - q("12Gi")).non_negative()) == "0"
    assert str((q("12Gi") - q("10Gi")).non_negative()) == "2Gi"


def test_multiply_by_integer_keeps_format() -> None:
    assert str(q("40Gi") * 2) == "80Gi"
    assert str(3 * q("100m")) == "300m"
    assert str(q("1e3") * 1000) == "1e6"


def test_comparisons() -> None:
    assert q("10000T") > q("100Gi")
    assert q("40Gi") == q("42949672960")
    assert q("1G") < q("1Gi")
    assert q("100m") > q("50m")
    assert q("-1") < q("0") < q("1n")
    assert q("1Gi") >= q("1024Mi")
    assert q("1Gi") <= q("1024Mi")
    assert q("1Gi").cmp(q("1073741824")) == 0


def test_equal_values_hash_equal() -> None:
    assert hash(q("40Gi")) == hash(q("42949672960"))
    assert len({q("1k"), q("1000"), q("1e3")}) == 1


def test_sign_and_zero() -> None:
    assert q("0Gi").is_zero()
    assert q("-5m").sign() == -1
    assert q("5m").sign() == 1
    assert q("0").sign() == 0


def test_coerce_accepts_api_json() -> None:
    assert str(Quantity.coerce(4)) == "4"
    assert str(Quantity.coerce("4Ki")) == "4Ki"
    with pytest.raises(QuantityError):
        Quantity.coerce(True)


class _Holder(BaseModel):
    value: Quantity


def test_pydantic_field_parses_and_serialises() -> None:
    holder = _Holder.model_validate({"value": "1024Mi"})
    assert holder.value == q("1Gi")
    assert holder.model_dump(mode="json") == {"value": "1Gi"}
    with pytest.raises(ValidationError):
        _Holder.model_validate({"value": "1K"})


def test_magnitudes_beyond_the_largest_suffix_stay_exact() -> None:
    # Spec 12 item 5: no valid single input needs this; the value must survive anyway.
    assert str(q("1000E")) == "1e21"
    assert str(q("4Ei") + q("4Ei") + q("4Ei")) == "12Ei"
    assert str(q("4Ei") * 1024) == "4096Ei"
