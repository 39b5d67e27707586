"""The shared taint core: the table of spec devicetaint §6 row by row, selectors, and allocation checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from operators.core.conditions import LATEST_TIME
from operators.dra.taints import (
    DeviceTaint,
    DeviceTaintSelector,
    DeviceToleration,
    Eviction,
    earliest_eviction,
    merge_evictions,
    selector_matches,
    taint_eviction_time,
    taint_prevents_allocation,
    toleration_tolerates,
)

T = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
KEY = "dra.example.com/unhealthy"
BROKEN = DeviceTaint(key=KEY, value="Broken", effect="NoExecute", time_added=T)


def tol(**fields: object) -> DeviceToleration:
    return DeviceToleration.model_validate(fields)


# --- §6 table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], T, id="none"),
        pytest.param(
            [tol(key=KEY, operator="Exists", effect="NoExecute", tolerationSeconds=60)],
            T + timedelta(seconds=60),
            id="exists-noexecute-60s",
        ),
        pytest.param([tol(key=KEY, operator="Exists", effect="NoExecute")], None, id="exists-forever"),
        pytest.param([tol(key=KEY, operator="Exists")], None, id="empty-effect-ours"),
        pytest.param([tol(operator="Exists")], None, id="empty-key-and-effect-ours"),
        pytest.param([tol(key=KEY, operator="Exists", effect="NoSchedule")], T, id="effect-noschedule"),
        pytest.param([tol(key=KEY, operator="Exists", effect="None")], T, id="effect-none"),
        pytest.param(
            [tol(key=KEY, operator="Equal", value="Fine", effect="NoExecute")], T, id="value-mismatch"
        ),
        pytest.param(
            [
                tol(key=KEY, operator="Exists", effect="NoExecute", tolerationSeconds=100),
                tol(key=KEY, operator="Exists", effect="NoExecute", tolerationSeconds=30),
            ],
            T + timedelta(seconds=30),
            id="smallest-seconds",
        ),
        pytest.param(
            [
                tol(key=KEY, operator="Exists", effect="NoExecute", tolerationSeconds=30),
                tol(key=KEY, operator="Exists", effect="NoExecute"),
            ],
            None,
            id="infinite-wins",
        ),
        pytest.param(
            [tol(key=KEY, operator="Exists", effect="NoExecute", tolerationSeconds=-5)], T, id="negative"
        ),
    ],
)
def test_eviction_time_table(tolerations: list[DeviceToleration], expected: datetime | None) -> None:
    assert taint_eviction_time(tolerations, BROKEN) == expected


def test_empty_effect_with_seconds_counts_them() -> None:
    toleration = tol(key=KEY, operator="Exists", tolerationSeconds=20)
    assert taint_eviction_time([toleration], BROKEN) == T + timedelta(seconds=20)


def test_matching_equal_value_delays() -> None:
    toleration = tol(key=KEY, operator="Equal", value="Broken", effect="NoExecute", tolerationSeconds=5)
    assert taint_eviction_time([toleration], BROKEN) == T + timedelta(seconds=5)


def test_untolerating_toleration_does_not_shorten() -> None:
    other = tol(key="other", operator="Exists", tolerationSeconds=0)
    matching = tol(key=KEY, operator="Exists", tolerationSeconds=50)
    assert taint_eviction_time([other, matching], BROKEN) == T + timedelta(seconds=50)


@pytest.mark.parametrize("effect", ["None", "NoSchedule", "Sideways", ""])
def test_only_no_execute_evicts(effect: str) -> None:
    assert taint_eviction_time([], BROKEN.model_copy(update={"effect": effect})) is None


def test_taint_without_time_added_never_evicts() -> None:
    assert taint_eviction_time([], BROKEN.model_copy(update={"time_added": None})) is None


def test_huge_toleration_seconds_saturates() -> None:
    toleration = tol(operator="Exists", tolerationSeconds=2**63 - 1)
    assert taint_eviction_time([toleration], BROKEN) == LATEST_TIME


# --- toleration_tolerates: the effect-general form -------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        pytest.param(tol(operator="Exists"), BROKEN, True, id="exists-everything"),
        pytest.param(tol(operator="Exists", effect="NoSchedule"), BROKEN, False, id="other-effect"),
        pytest.param(
            tol(operator="Exists", effect="NoSchedule"),
            BROKEN.model_copy(update={"effect": "NoSchedule"}),
            True,
            id="same-effect-noschedule",
        ),
        pytest.param(tol(key="x", operator="Exists"), BROKEN, False, id="other-key"),
        pytest.param(tol(key=KEY, value="Broken"), BROKEN, True, id="empty-operator-is-equal"),
        pytest.param(tol(key=KEY, value="Fine"), BROKEN, False, id="empty-operator-value-mismatch"),
        pytest.param(tol(key=KEY, operator="Equal", value="Broken"), BROKEN, True, id="equal"),
        pytest.param(tol(key=KEY, operator="Gt", value="Broken"), BROKEN, False, id="unknown-operator"),
        pytest.param(tol(), BROKEN, False, id="empty-equal-needs-empty-value"),
        pytest.param(tol(), DeviceTaint(key="k", effect="NoExecute"), True, id="empty-equal-empty-value"),
    ],
)
def test_toleration_tolerates(toleration: DeviceToleration, taint: DeviceTaint, expected: bool) -> None:
    assert toleration_tolerates(toleration, taint) is expected


def test_allocation_blocked_by_untolerated_schedule_effects_only() -> None:
    no_schedule = DeviceTaint(key="a", effect="NoSchedule")
    no_execute = DeviceTaint(key="b", effect="NoExecute")
    harmless = [DeviceTaint(key="c", effect="None"), DeviceTaint(key="d", effect="Unknown")]
    assert not taint_prevents_allocation(harmless, [])
    assert taint_prevents_allocation([no_schedule], [])
    assert taint_prevents_allocation([no_execute], [tol(key="a", operator="Exists")])
    assert not taint_prevents_allocation([no_schedule, no_execute], [tol(operator="Exists")])


# --- Selectors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param(None, False, id="absent-matches-nothing"),
        pytest.param(DeviceTaintSelector(), True, id="empty-matches-everything"),
        pytest.param(DeviceTaintSelector(driver="dra.example.com"), True, id="driver"),
        pytest.param(DeviceTaintSelector(pool="node-1"), True, id="pool-without-driver"),
        pytest.param(DeviceTaintSelector(driver="other.example.com"), False, id="other-driver"),
        pytest.param(DeviceTaintSelector(device="gpu-9"), False, id="other-device"),
        pytest.param(
            DeviceTaintSelector(driver="dra.example.com", pool="node-1", device="gpu-0"), True, id="all-three"
        ),
    ],
)
def test_selector_matches(selector: DeviceTaintSelector | None, expected: bool) -> None:
    assert selector_matches(selector, "dra.example.com", "node-1", "gpu-0") is expected


def test_selector_parses_api_json() -> None:
    selector = DeviceTaintSelector.model_validate({"driver": "d", "device": "x"})
    assert (selector.driver, selector.pool, selector.device) == ("d", None, "x")


# --- Combining ---------------------------------------------------------------------------------------


def test_earliest_eviction_keeps_every_non_ignored_reason() -> None:
    late = BROKEN.model_copy(update={"time_added": T + timedelta(seconds=100)})
    forever = [tol(operator="Exists", effect="NoExecute")]
    eviction = earliest_eviction([([], BROKEN, "a"), ([], late, "b"), (forever, BROKEN, "c")])
    assert eviction == Eviction(when=T, reasons=frozenset({"a", "b"}))


def test_earliest_eviction_none_when_all_ignored() -> None:
    assert earliest_eviction([([tol(operator="Exists")], BROKEN, "a")]) is None


def test_merge_evictions() -> None:
    first = Eviction(when=T + timedelta(seconds=5), reasons=frozenset({"a"}))
    second = Eviction(when=T, reasons=frozenset({"b"}))
    assert merge_evictions([None, first, second]) == Eviction(when=T, reasons=frozenset({"a", "b"}))
    assert merge_evictions([None]) is None


def test_time_added_parses_rfc3339() -> None:
    taint = DeviceTaint.model_validate(
        {"key": KEY, "effect": "NoExecute", "timeAdded": "2026-03-01T12:00:00Z"}
    )
    assert taint.time_added == T
