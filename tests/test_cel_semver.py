"""The Kubernetes semver library in DRA CEL: parsing as blang/semver does, normalisation, ordering.

Expectations (including error texts) were checked against Kubernetes v1.37.2's CEL environment.
"""

from __future__ import annotations

import itertools

import pytest
from cel_support import value

from operators.dra.cel import CelEvaluationError, compile_expression


def parse_error(text: str, normalize: bool = False) -> str:
    call = f"semver({text!r}, true)" if normalize else f"semver({text!r})"
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(f"{call} == {call}").evaluate()
    return caught.value.detail


@pytest.mark.parametrize(
    ("text", "strict", "normalized"),
    [
        ("1.0.0", True, True),
        ("0.1.0-alpha.1", True, True),
        ("1.2.3-rc.1+build.5", True, True),
        ("1.2.3-x-y.z+a-b.c", True, True),
        ("hello", False, False),
        ("200K", False, False),
        ("1.0", False, True),
        ("1", False, True),
        ("v1.0.0", False, True),
        ("v1.0", False, True),
        ("01.01.01", False, True),
        ("1.00", False, True),
        ("1.0-rc", False, False),  # a short version cannot carry a pre-release
        ("V1.0.0", False, False),
        (" 1.0.0", False, False),  # unlike ParseTolerant, no trimming
        ("1.2.3.4", False, False),
        ("1.0.0-01", False, False),
        ("1.0.0-", False, False),
        ("1.0.0+", False, False),
        ("1.0.0-a..b", False, False),
        ("18446744073709551615.0.0", True, True),
        ("18446744073709551616.0.0", False, False),
        ("", False, False),
    ],
)
def test_is_semver(text: str, strict: bool, normalized: bool) -> None:
    assert bool(value(f"isSemver({text!r})")) is strict
    assert bool(value(f"isSemver({text!r}, true)")) is normalized


@pytest.mark.parametrize(
    ("text", "normalize", "detail"),
    [
        ("1.0", False, "No Major.Minor.Patch elements found"),
        ("", False, "Version string empty"),
        ("v1.0.0", False, 'Invalid character(s) found in major number "v1"'),
        ("Three", True, 'Invalid character(s) found in major number "0Three"'),
        ("01.0.0", False, 'Major number must not contain leading zeroes "01"'),
        ("1.01.0", False, 'Minor number must not contain leading zeroes "01"'),
        ("1.0.01", False, 'Patch number must not contain leading zeroes "01"'),
        ("1.0.0-01", False, 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.0.0-", False, "Prerelease is empty"),
        ("1.0.0+", False, "Build meta data is empty"),
        ("1.0.0-al$pha", False, 'Invalid character(s) found in prerelease "al$pha"'),
        ("1.0.0+b$", False, 'Invalid character(s) found in build meta data "b$"'),
        ("1.0-rc", True, "short version cannot contain PreRelease/Build meta data"),
    ],
)
def test_parse_errors_carry_blang_messages(text: str, normalize: bool, detail: str) -> None:
    assert parse_error(text, normalize) == detail


@pytest.mark.parametrize(
    "expression",
    [
        "semver('v1.0.0', true) == semver('1.0.0')",
        "semver('1.0', true) == semver('1.0.0')",
        "semver('1', true) == semver('1.0.0')",
        "semver('01.01.01', true) == semver('1.1.1')",
        "semver('v01.2.3-rc.1', true) == semver('1.2.3-rc.1')",
        "semver('1.0.0+a') == semver('1.0.0+b')",  # build metadata never counts
        "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3",
        "semver('0.1.0-alpha.1').major() == 0",
        # Go converts the uint64 component to int64, which wraps.
        "semver('18446744073709551615.0.0').major() == -1",
        "semver('9223372036854775808.0.0').major() == -9223372036854775808",
    ],
)
def test_normalization_equality_and_components(expression: str) -> None:
    assert value(expression)


# The semver.org 2.0.0 precedence chain, each element below the next.
CHAIN = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "2.0.0",
    "10.0.0",
]


@pytest.mark.parametrize(("lower", "higher"), list(itertools.pairwise(CHAIN)))
def test_ordering(lower: str, higher: str) -> None:
    low, high = f"semver({lower!r})", f"semver({higher!r})"
    assert value(f"{low}.isLessThan({high}) && {high}.isGreaterThan({low})")
    assert value(f"{low}.compareTo({high})") == -1
    assert value(f"{high}.compareTo({low})") == 1
    assert value(f"{low}.compareTo({low})") == 0
    assert not value(f"{low}.isGreaterThan({high}) || {low}.isLessThan({low})")


def test_numeric_identifiers_sort_before_alphanumeric_and_ascii_order_applies() -> None:
    assert value("semver('1.0.0-1').isLessThan(semver('1.0.0-a'))")
    assert value("semver('1.0.0-B').isLessThan(semver('1.0.0-a'))")
    assert value("semver('1.0.0+a').compareTo(semver('1.0.0')) == 0")


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        (
            "semver('1.0.0') == '1.0.0'",
            "found no matching overload for '_==_' applied to '(kubernetes.Semver, string)'",
        ),
        (
            "semver('1.0.0').isLessThan(quantity('1'))",
            "applied to '(kubernetes.Semver, kubernetes.Quantity)'",
        ),
        ("semver(1) == semver('1.0.0')", "found no matching overload for 'semver' applied to '(int)'"),
        ("semver('1.0.0', 'yes') == semver('1.0.0')", "applied to '(string, string)'"),
    ],
)
def test_misuse_is_an_error(expression: str, detail: str) -> None:
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(expression).evaluate()
    assert detail in caught.value.detail
