"""The status of a DeviceTaintSelector: Ready, Invalid, EvictionInProgress and selectedDevices."""

from __future__ import annotations

from typing import Any

from taintselector_builders import GPU_DRIVER, rule, selector

from operators.dra.selection import REASON_CEL_RUNTIME_ERROR, Invalid, Selection
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED
from operators.taintselector.models import DeviceId, TaintSelector
from operators.taintselector.rules import RuleDiff, RuleUpdate
from operators.taintselector.status import needs_write, selector_status

NOW = "2026-03-01T12:00:00Z"
LATER = "2026-03-01T12:05:00Z"
TWO = Selection(devices=(DeviceId(GPU_DRIVER, "node-1", "gpu-0"), DeviceId(GPU_DRIVER, "node-1", "gpu-1")))
BROKEN = Invalid(REASON_CEL_RUNTIME_ERROR, "CEL expression 'x' failed on device a/b/c: no such key: uuid.")


def status_in_place(
    spec: TaintSelector, outcome: Selection | Invalid, *, now: str | None = None
) -> dict[str, Any]:
    """The status when the rules API is served, no rule write is pending and no rule reports."""
    return selector_status(spec, outcome, rules_available=True, pending=None, rules=[], now=now)


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_ready_when_the_rules_are_in_place() -> None:
    status = status_in_place(selector(driver=GPU_DRIVER, generation=4), TWO, now=NOW)
    assert status["observedGeneration"] == 4
    assert status["selectedDevices"] == 2
    assert conditions(status) == {
        "Ready": ("True", "RulesInPlace", "2 devices selected, each tainted by its own DeviceTaintRule."),
        "Invalid": ("False", "Valid", "The selector is valid."),
        "EvictionInProgress": (
            "False",
            "NoRules",
            "No DeviceTaintRule exists for this selector, so nothing is evicted.",
        ),
    }
    assert all(c["observedGeneration"] == 4 and c["lastTransitionTime"] == NOW for c in status["conditions"])


def test_pending_writes_and_conflicts_are_not_ready() -> None:
    spec = selector(driver=GPU_DRIVER)
    pending = RuleDiff(create=({},), update=(RuleUpdate("x", {}),), delete=("a", "b"))
    status = selector_status(spec, TWO, rules_available=True, pending=pending, rules=[])
    assert conditions(status)["Ready"] == (
        "False",
        "RulesPending",
        "DeviceTaintRules still to create: 1, to update: 1, to delete: 2.",
    )
    status = selector_status(
        spec, TWO, rules_available=True, pending=RuleDiff(conflicts=("r1", "r2")), rules=[]
    )
    assert conditions(status)["Ready"] == (
        "False",
        "RuleConflict",
        "DeviceTaintRule r1, r2 is controlled by another owner; waiting for it to go away.",
    )


def test_invalid_keeps_the_previous_count_and_rules() -> None:
    previous = {"selectedDevices": 2, "observedGeneration": 1, "conditions": []}
    spec = selector("bad", generation=2, status=previous)
    status = status_in_place(spec, BROKEN, now=NOW)
    assert status["selectedDevices"] == 2
    kept = "Existing DeviceTaintRules are left as they are until the spec is fixed."
    assert conditions(status)["Invalid"] == ("True", REASON_CEL_RUNTIME_ERROR, f"{BROKEN.message} {kept}")
    assert conditions(status)["Ready"] == ("False", "Invalid", f"{BROKEN.message} {kept}")
    # A never-valid selector has no count to keep.
    assert "selectedDevices" not in status_in_place(selector("bad"), BROKEN)


def test_a_cluster_without_device_taint_rules_is_reported_not_fatal() -> None:
    status = selector_status(selector(driver=GPU_DRIVER), TWO, rules_available=False, pending=None, rules=[])
    assert status["selectedDevices"] == 2
    assert conditions(status)["Ready"] == (
        "False",
        "DeviceTaintRuleUnavailable",
        f"The 2 devices selected cannot be tainted: {DEVICE_TAINT_RULES_UNSERVED}.",
    )


def test_empty_selector_and_no_match() -> None:
    empty = status_in_place(selector(), Selection((), empty_selector=True))
    assert conditions(empty)["Ready"][:2] == ("True", "EmptySelector")
    assert empty["selectedDevices"] == 0
    none = status_in_place(selector(driver="x"), Selection(()))
    assert conditions(none)["Ready"] == (
        "True",
        "RulesInPlace",
        "No device matches the selector, so no device is tainted.",
    )


def test_eviction_comes_from_the_rules() -> None:
    rules = [
        rule("r1", eviction=("True", "PodsPendingEviction", "2 pods need to be evicted in 1 namespace."))
    ]
    status = selector_status(
        selector(driver=GPU_DRIVER), TWO, rules_available=True, pending=None, rules=rules
    )
    assert conditions(status)["EvictionInProgress"][:2] == ("True", "PodsPendingEviction")


def test_transition_times_move_only_with_status_and_rewrites_are_skipped() -> None:
    first = status_in_place(selector(driver=GPU_DRIVER), TWO, now=NOW)
    again = status_in_place(selector(driver=GPU_DRIVER, status=first), TWO, now=LATER)
    assert again == first
    assert not needs_write(first, again)
    flipped = status_in_place(selector(driver=GPU_DRIVER, status=first), BROKEN, now=LATER)
    assert needs_write(first, flipped)
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times == {"Ready": LATER, "Invalid": LATER, "EvictionInProgress": NOW}
