"""The Kubernetes quantity library in DRA CEL, function by function.

Every expectation was checked against Kubernetes v1.37.2 itself (k8s.io/dynamic-resource-allocation
compiled with cel-go v0.29.2), including the cases where apimachinery's storage shows through:
``quantity("1.0").isInteger()`` is false there, and so it is here.
"""

from __future__ import annotations

import math

import pytest
from cel_support import fails, value

from operators.dra.cel import CelCompileError, compile_expression


@pytest.mark.parametrize(
    "expression",
    [
        "quantity('12Mi') == quantity('12582912')",
        "quantity('200M') == quantity('0.2G')",
        "quantity('2M') == quantity('0.002G') && quantity('2000k') == quantity('2M')",
        "quantity('200M') != quantity('0.3G')",
        "quantity('1e3') == quantity('1k') && quantity('1E3') == quantity('1k')",
        "quantity('0.5Ki') == quantity('512')",
        "quantity('.') == quantity('0') && quantity('1.') == quantity('1')",
        "quantity('0.0000000001') == quantity('1n')",  # rounded up to one nano unit
        "quantity('-0.0000000001') == quantity('-1n')",  # away from zero
        "quantity('1e-400') == quantity('1n')",
        "quantity('9Ei') == quantity('8Ei')",  # binary values are capped at 2**63 - 1
        "quantity('1e4294967296') == quantity('1')",  # the exponent wraps to 32 bits, as in Go
    ],
)
def test_parsing_and_equality_by_value(expression: str) -> None:
    assert value(expression)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("20", True),
        ("20M", True),
        ("20Mi", True),
        ("1.3G", True),
        ("10000k", True),
        ("20Mo", False),
        ("10Mm", False),
        ("1,3G", False),
        ("200K", False),
        ("Three", False),
        ("", False),
        (" 1", False),
        ("1e", False),
        ("--1", False),
        ("1e99999999999999999999", False),
        (".e-20", False),
        # apimachinery reads a bare suffix, sign or dot as zero (its documentation says otherwise).
        ("Mi", True),
        ("k", True),
        ("+", True),
        ("-", True),
        (".", True),
        ("0.e-20", True),
    ],
)
def test_is_quantity(text: str, valid: bool) -> None:
    assert bool(value(f"isQuantity({text!r})")) is valid


def test_quantity_errors_carry_apimachinery_messages() -> None:
    assert fails("quantity('10Mo') == quantity('1')").startswith(
        "quantities must match the regular expression"
    )
    assert fails("quantity('10Mm') == quantity('1')") == "unable to parse quantity's suffix"
    assert fails("quantity('.e-20') == quantity('1')") == "unable to parse numeric part of quantity"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("quantity('50M').isLessThan(quantity('50Mi'))", True),
        ("quantity('50M').isLessThan(quantity('100M'))", True),
        ("quantity('100M').isLessThan(quantity('50M'))", False),
        ("quantity('50Mi').isGreaterThan(quantity('50M'))", True),
        ("quantity('150Mi').isGreaterThan(quantity('100Mi'))", True),
        ("quantity('50M').isGreaterThan(quantity('100M'))", False),
        ("quantity('200M').compareTo(quantity('0.2G'))", 0),
        ("quantity('50M').compareTo(quantity('50Mi'))", -1),
        ("quantity('50Mi').compareTo(quantity('50M'))", 1),
        ("quantity('100Gi').isGreaterThan(quantity('100G'))", True),
    ],
)
def test_comparisons(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("quantity('50k').add(quantity('20')) == quantity('50.02k')", True),
        ("quantity('50k').add(20).isLessThan(quantity('50020'))", False),
        ("quantity('50k').sub(quantity('20')) == quantity('49.98k')", True),
        ("quantity('50k').sub(20) == quantity('49980')", True),
        ("quantity('50k').add(20).sub(quantity('100k')).asInteger()", -49980),
        ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger()", 20),
        ("quantity('9223372036854775807').add(1).compareTo(quantity('9223372036854775808'))", 0),
        (
            "[quantity('9999999999999999999999999999999999999')]"
            ".all(x, x.add(quantity('1')).compareTo(x.add(quantity('2'))) == -1)",
            True,
        ),
    ],
)
def test_add_and_sub(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("text", "integer"),
    [
        ("50k", 50000),
        ("50", 50),
        ("1k", 1000),
        ("1e18", 10**18),
        ("922337203685477580", 922337203685477580),
        ("-8e18", -8 * 10**18),
        ("3Mi", 3145728),
        # Whole numbers stored with a negative scale or as a big decimal do not convert.
        ("1.0", None),
        ("1000m", None),
        ("0.5", None),
        ("1e-9", None),
        ("1e19", None),
        ("8Ei", None),
        ("9223372036854775808", None),
        # 19 digits, a fraction with a binary suffix, or a big binary multiple: parsed as big decimals.
        ("9223372036854775807", None),
        ("-9223372036854775808", None),
        ("1.5Gi", None),
        ("7Ei", None),
        ("1234567890123456789", None),
        ("0.0000000001", None),
        ("9999999999999999999999999999999999999G", None),
    ],
)
def test_is_integer_and_as_integer(text: str, integer: int | None) -> None:
    assert bool(value(f"quantity({text!r}).isInteger()")) is (integer is not None)
    if integer is None:
        assert fails(f"quantity({text!r}).asInteger()") == "cannot convert value to integer"
    else:
        assert value(f"quantity({text!r}).asInteger()") == integer


@pytest.mark.parametrize(
    ("expression", "integer"),
    [
        ("quantity('1').sub(quantity('1'))", True),
        ("quantity('1.5').add(quantity('0.5'))", False),  # 2, but kept at scale -1
        ("quantity('1k').add(quantity('1'))", True),
        ("quantity('0').add(quantity('1m'))", False),
        ("quantity('1m').sub(quantity('1m'))", False),
        ("quantity('9223372036854775807').add(1)", False),  # overflowed into a big decimal
    ],
)
def test_is_integer_after_arithmetic(expression: str, integer: bool) -> None:
    assert bool(value(f"{expression}.isInteger()")) is integer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50.703k", 50703.0),
        ("1500m", 1.5),
        ("0.1", 0.1),
        ("1n", 1e-9),
        ("1.5e-7", 1.5e-7),
        ("1e300", 1e300),
        ("-2.5Gi", -2684354560.0),
        # Go multiplies by a table-based power of ten: 4.35 reads as 435 * 10**-2.
        ("4.35", 435 * (1 / 100)),
        ("1e400", math.inf),
        ("1e-400", 1e-9),  # rounded up to one nano unit when parsed
    ],
)
def test_as_approximate_float(text: str, expected: float) -> None:
    assert value(f"quantity({text!r}).asApproximateFloat()") == expected


def test_sign_is_a_global_function_in_kubernetes() -> None:
    assert value("sign(quantity('-5')) == -1")
    assert value("sign(quantity('0')) == 0")
    assert value("sign(quantity('5k')) == 1")
    with pytest.raises(CelCompileError, match="global function"):
        compile_expression("quantity('5').sign() == 1")


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("quantity(5) == quantity('5')", "found no matching overload for 'quantity' applied to '(int)'"),
        ("isQuantity(5)", "found no matching overload for 'isQuantity' applied to '(int)'"),
        ("quantity('1').add('1') == quantity('2')", "applied to '(kubernetes.Quantity, string)'"),
        ("quantity('1').add(1.5) == quantity('2')", "applied to '(kubernetes.Quantity, double)'"),
        (
            "quantity('1') == 1",
            "found no matching overload for '_==_' applied to '(kubernetes.Quantity, int)'",
        ),
        ("quantity('1') < quantity('2')", "found no matching overload for '_<_'"),
        ("quantity('1e5000').add(quantity('1'))", "not supported"),
    ],
)
def test_misuse_is_an_error_not_a_crash(expression: str, detail: str) -> None:
    assert detail in fails(expression)
