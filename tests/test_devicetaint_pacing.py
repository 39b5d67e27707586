"""Eviction pacing: the annotation, the shared buckets, and which taints of a due pod are paced
(docs/device-health.md, Behaviour, 6). Time is passed in; no test sleeps."""

from __future__ import annotations

from typing import Any

import pytest
from devicetaint_builders import P1, T, fixture_f, rule, seconds, taint, tolerating

from operators.core.keys import POD, Key
from operators.devicetaint.cache import ClusterCache
from operators.devicetaint.pacing import (
    MAX_PER_MINUTE,
    REASON_INVALID_PACING,
    Pace,
    Pacer,
    malformed,
    pace_of,
    parse_per_minute,
    scope_of,
)
from operators.devicetaint.podeviction import PodEvict
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

GPU0 = {"driver": "dra.example.com", "pool": "node-1", "device": "gpu-0"}
POLICY = {
    "apiVersion": "dra-operators.io/v1alpha1",
    "kind": "DeviceHealthPolicy",
    "name": "gpus",
    "uid": "P1",
    "controller": True,
}


def paced(per_minute: str, **kwargs: Any) -> Any:
    return rule(selector=GPU0, annotations={EVICTIONS_PER_MINUTE: per_minute}, **kwargs)


# --- The annotation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("6", 6),
        ("1", 1),
        ("06", 6),
        (None, None),
        ("0", None),
        ("-3", None),
        ("2.5", None),
        ("", None),
        (str(MAX_PER_MINUTE), MAX_PER_MINUTE),
        ("0" * 5000 + "6", 6),
        (str(MAX_PER_MINUTE + 1), None),
        ("1" + "0" * 400, None),  # no float rate holds it
        ("1" + "0" * 5000, None),  # past the digits Python reads as an int
    ],
    ids=lambda v: v[:12] + "..." if isinstance(v, str) and len(v) > 12 else None,
)
def test_only_a_positive_integer_paces(value: str | None, number: int | None) -> None:
    assert parse_per_minute(value) == number
    assert malformed(value) is (value is not None and number is None)


def test_a_rule_is_its_own_scope_unless_a_project_object_controls_it() -> None:
    assert scope_of(paced("6")) == "rule R1"
    assert scope_of(paced("6", owners=[POLICY])) == "owner P1"
    not_controller = {**POLICY, "controller": False}
    assert scope_of(paced("6", owners=[not_controller])) == "rule R1"
    foreign = {**POLICY, "apiVersion": "example.com/v1"}
    assert scope_of(paced("6", owners=[foreign])) == "rule R1"
    assert pace_of(paced("6")) == Pace("rule R1", 6)
    assert pace_of(rule(selector=GPU0)) is None
    assert pace_of(paced("many")) is None


def test_only_the_pacing_annotation_is_kept() -> None:
    kept = rule(annotations={EVICTIONS_PER_MINUTE: "6", "kubectl.kubernetes.io/last-applied": "{}"})
    assert dict(kept.metadata.annotations) == {EVICTIONS_PER_MINUTE: "6"}


# --- The pacer --------------------------------------------------------------------------------------


def test_the_pacer_lets_one_pod_go_per_token_and_says_when_the_next_may() -> None:
    pacer, pace = Pacer(), Pace("rule R1", 6)
    assert pacer.admit([pace], 0.0) == 0.0
    assert pacer.admit([pace], 0.0) == pytest.approx(10.0)
    assert pacer.admit([pace], 9.0) == pytest.approx(1.0)
    assert pacer.admit([pace], 10.0) == 0.0


def test_an_unpaced_taint_or_none_due_never_waits() -> None:
    pacer, pace = Pacer(), Pace("rule R1", 6)
    assert pacer.admit([pace], 0.0) == 0.0
    assert pacer.admit([pace, None], 0.0) == 0.0
    assert pacer.admit([], 0.0) == 0.0
    assert pacer.admit([pace], 0.0) > 0.0, "the unpaced evictions took no token"


def test_rules_of_one_owner_share_a_bucket_and_other_rules_do_not() -> None:
    pacer = Pacer()
    assert pacer.admit([Pace("owner P1", 6)], 0.0) == 0.0
    assert pacer.admit([Pace("owner P1", 6)], 1.0) == pytest.approx(9.0)
    assert pacer.admit([Pace("rule R2", 6)], 1.0) == 0.0


def test_any_paced_rule_with_a_token_lets_the_pod_go() -> None:
    pacer, a, b = Pacer(), Pace("rule A", 6), Pace("rule B", 2)
    assert pacer.admit([a], 0.0) == 0.0
    assert pacer.admit([a, b], 0.0) == 0.0, "B's token"
    assert pacer.admit([a, b], 1.0) == pytest.approx(9.0), "the soonest of the two"


def test_full_buckets_are_dropped_as_they_act_as_new_ones() -> None:
    pacer = Pacer()
    pacer.admit([Pace("rule A", 6)], 0.0)
    pacer.admit([Pace("rule B", 60)], 0.0)
    assert pacer.bucket_count() == 2
    pacer.admit([Pace("rule A", 6)], 5.0)
    assert pacer.bucket_count() == 1, "B refilled after 1 s"


# --- What the cache says about a due pod -------------------------------------------------------------


def evict_decision(state: ClusterCache, item: Key = P1) -> PodEvict:
    decision = state.decide_pod(item, T + seconds(1))
    assert isinstance(decision, PodEvict)
    return decision


def test_a_pod_due_only_for_a_paced_rule_is_paced() -> None:
    state = fixture_f()
    state.apply_rule(paced("6"), T)
    assert state.paces(evict_decision(state), T + seconds(1)) == (Pace("rule R1", 6),)


def test_an_unannotated_rule_is_not_looked_at_further() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector=GPU0), T)
    assert state.paces(evict_decision(state), T + seconds(1)) == ()


def test_a_due_slice_taint_is_never_paced() -> None:
    state = fixture_f(slice_taints={"gpu-0": [taint()]})
    state.apply_rule(paced("6"), T)
    assert set(state.paces(evict_decision(state), T + seconds(1))) == {Pace("rule R1", 6), None}


def test_a_slice_taint_that_is_not_due_yet_leaves_the_pod_paced() -> None:
    # The claim tolerates the slice taint (value Broken) for 600 s, the rule's (value Paced) not at all.
    state = fixture_f(
        slice_taints={"gpu-0": [taint()]}, tolerations=[tolerating(600, operator="Equal", value="Broken")]
    )
    state.apply_rule(paced("6", value="Paced"), T)
    assert state.paces(evict_decision(state), T + seconds(1)) == (Pace("rule R1", 6),)


def test_a_malformed_value_warns_once_per_value_and_paces_nothing() -> None:
    state = fixture_f()
    first = state.apply_rule(paced("fast"), T)
    assert [(w.reason, w.item.name) for w in first.rule_warnings] == [(REASON_INVALID_PACING, "example")]
    assert first.warnings == [
        f"DeviceTaintRule example: annotation {EVICTIONS_PER_MINUTE}: 'fast' is not a positive integer "
        "of at most 9223372036854775807; the evictions of this rule are not paced"
    ]
    assert state.apply_rule(paced("fast"), T).rule_warnings == [], "the same value again"
    assert len(state.apply_rule(paced("0"), T).rule_warnings) == 1, "a new value"
    assert state.paces(evict_decision(state), T + seconds(1)) == ()


@pytest.mark.parametrize("value", ["1" + "0" * 400, "1" + "0" * 5000])
def test_a_value_out_of_range_is_malformed_warned_with_a_short_text_and_paces_nothing(value: str) -> None:
    state = fixture_f()
    effects = state.apply_rule(paced(value), T)
    assert [(w.reason, w.item.name) for w in effects.rule_warnings] == [(REASON_INVALID_PACING, "example")]
    assert effects.warnings == [
        f"DeviceTaintRule example: annotation {EVICTIONS_PER_MINUTE}: '{value[:37]}...' is not a positive "
        "integer of at most 9223372036854775807; the evictions of this rule are not paced"
    ]
    assert state.paces(evict_decision(state), T + seconds(1)) == ()


def test_the_largest_pace_is_a_rate_the_pacer_holds() -> None:
    pacer, pace = Pacer(), Pace("rule R1", MAX_PER_MINUTE)
    assert pacer.admit([pace], 0.0) == 0.0
    assert 0.0 < pacer.admit([pace], 0.0) < 1e-15


def test_a_changed_pace_wakes_the_pods_that_wait() -> None:
    state = fixture_f()
    state.apply_rule(paced("6"), T)
    effects = state.apply_rule(paced("60"), T)
    assert Key(POD, "ns1", "p1", "U1") in [e.item for e in effects.enqueue]
