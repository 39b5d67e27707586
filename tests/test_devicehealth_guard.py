"""maxUnavailable (operators.devicehealth.guard, validation.Limit): the arithmetic and the order."""

from __future__ import annotations

import pytest
from devicehealth_builders import at, gpu

from operators.devicehealth.guard import guard
from operators.devicehealth.models import HealthPolicySpec
from operators.devicehealth.validation import (
    REASON_INVALID_SPEC,
    REASON_MAX_UNAVAILABLE_ABOVE_SCOPE,
    Limit,
    ValidSpec,
    check_scope_size,
    check_spec,
)
from operators.dra.selection import Invalid


@pytest.mark.parametrize(
    ("limit", "size", "allowed"),
    [
        (Limit(3), 10, 3),
        (Limit(0), 10, 0),
        (Limit(25, percent=True), 8, 2),
        (Limit(25, percent=True), 7, 1),  # 1.75 rounds down
        (Limit(25, percent=True), 2, 1),  # 0.5 rounds down to 0, but at least one
        (Limit(0, percent=True), 100, 0),  # unless the value is 0
        (Limit(100, percent=True), 5, 5),
        (Limit(50, percent=True), 0, 1),
    ],
)
def test_a_limit_of_a_size(limit: Limit, size: int, allowed: int) -> None:
    assert limit.of(size) == allowed


def test_longest_signalled_first_then_driver_pool_and_device() -> None:
    scope = [gpu("a", f"gpu-{i}") for i in range(4)]
    candidates = [(at(10), gpu("a", "gpu-3")), (at(0), gpu("a", "gpu-2")), (at(10), gpu("a", "gpu-1"))]
    decided = guard(Limit(2), scope, [], candidates)
    assert decided.taint == (gpu("a", "gpu-2"), gpu("a", "gpu-1"))
    assert decided.held_back == (gpu("a", "gpu-3"),)


def test_tainted_devices_keep_their_place_even_above_a_lowered_limit() -> None:
    scope = [gpu("a", f"gpu-{i}") for i in range(4)]
    decided = guard(Limit(1), scope, [gpu("a", "gpu-0"), gpu("a", "gpu-1")], [(at(0), gpu("a", "gpu-2"))])
    assert decided.taint == ()
    assert decided.held_back == (gpu("a", "gpu-2"),)


def test_a_percentage_also_holds_per_pool() -> None:
    # 50% of 8 devices allows 4 over the scope, but 50% of pool a's 2 devices allows only 1 there.
    scope = [gpu("a", "gpu-0"), gpu("a", "gpu-1"), *(gpu("b", f"gpu-{i}") for i in range(6))]
    candidates = [(at(0), gpu("a", "gpu-0")), (at(1), gpu("a", "gpu-1")), (at(2), gpu("b", "gpu-0"))]
    decided = guard(Limit(50, percent=True), scope, [], candidates)
    assert decided.taint == (gpu("a", "gpu-0"), gpu("b", "gpu-0"))
    assert decided.held_back == (gpu("a", "gpu-1"),)


def test_zero_holds_back_everything() -> None:
    decided = guard(Limit(0), [gpu("a", "gpu-0")], [], [(at(0), gpu("a", "gpu-0"))])
    assert (decided.taint, decided.held_back) == ((), (gpu("a", "gpu-0"),))


def _spec(**fields: object) -> ValidSpec | Invalid:
    body = {"signals": {"kubelet": {}}, **fields}
    return check_spec(HealthPolicySpec.model_validate(body))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, Limit(1)), (0, Limit(0)), ("25%", Limit(25, percent=True)), ("0%", Limit(0, percent=True))],
)
def test_max_unavailable_reads_a_number_or_a_percentage(value: object, expected: Limit) -> None:
    spec = _spec(maxUnavailable=value)
    assert isinstance(spec, ValidSpec)
    assert spec.max_unavailable == expected


@pytest.mark.parametrize("value", [-1, "3", "101%", "25 percent", True, 1.5])
def test_a_bad_max_unavailable_is_invalid(value: object) -> None:
    spec = _spec(maxUnavailable=value)
    assert isinstance(spec, Invalid)
    assert spec.reason == REASON_INVALID_SPEC
    assert "maxUnavailable" in spec.message


def test_a_number_above_the_scope_is_refused_but_not_an_empty_scope_or_a_percentage() -> None:
    number = _spec(maxUnavailable=3)
    percent = _spec(maxUnavailable="100%")
    assert isinstance(number, ValidSpec)
    assert isinstance(percent, ValidSpec)
    problem = check_scope_size(number, 2)
    assert problem is not None
    assert problem.reason == REASON_MAX_UNAVAILABLE_ABOVE_SCOPE
    assert problem.message == "maxUnavailable 3 is above the 2 devices in the scope."
    assert check_scope_size(number, 3) is None
    assert check_scope_size(number, 0) is None
    assert check_scope_size(percent, 1) is None
