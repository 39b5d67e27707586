"""The plans devicehealth's pure code returns for one pass (operators.devicehealth.decide)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from devicehealth_builders import (
    GPU,
    HEALTH_KEY,
    POLICY_UID,
    RULES_API,
    at,
    claim,
    device,
    events,
    gpu,
    pod,
    policy,
    resource_slice,
    rule,
    writes,
)

from operators.core.conditions import FALSE, TRUE, find, format_time, parse_time
from operators.core.plan import Apply, Create, Delete, Patch, Plan
from operators.core.reconcile import Done, Requeue
from operators.devicehealth.decide import (
    EVENT_CLEARED,
    EVENT_DEVICE_UNHEALTHY,
    EVENT_HELD_BACK,
    EVENT_INVALID,
    EVENT_RULE_CONFLICT,
    EVENT_TAINTED,
    Decision,
    View,
    decide,
    held_from,
)
from operators.devicehealth.models import DeviceTaintRule, HealthPolicy
from operators.devicehealth.rules import TAINT_KEY
from operators.devicehealth.signals import Track
from operators.devicehealth.status import (
    ACTIVE,
    READY,
    REASON_DEVICE_TAINT_RULE_UNAVAILABLE,
    REASON_HELD_BACK,
    REASON_IDLE,
    REASON_REMEDIATING,
)
from operators.devicehealth.validation import REASON_MAX_UNAVAILABLE_ABOVE_SCOPE, REASON_NO_SIGNAL
from operators.dra import taintrules
from operators.dra.pools import DeviceId
from operators.dra.selection import REASON_INVALID_CEL, Invalid, Selection
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
STATUS = "/apis/dra-operators.io/v1alpha1/devicehealthpolicies/gpu-health/status"
FOUR = tuple(gpu("node-1", f"gpu-{i}") for i in range(4))
SCOPE = Selection(devices=FOUR)


def all_unhealthy_since(seconds: float, count: int = 4) -> list[Any]:
    devices = [device(f"gpu-{i}", unhealthy_since=at(seconds)) for i in range(count)]
    devices += [device(f"gpu-{i}") for i in range(count, 4)]
    return [resource_slice("node-1", *devices)]


def run(
    target: HealthPolicy,
    *,
    slices: Sequence[Any] = (),
    rules: Sequence[DeviceTaintRule] = (),
    now: float = 100,
    tracks: dict[DeviceId, Track] | None = None,
    outcome: Selection | Invalid = SCOPE,
    claims: dict[tuple[str, str], Any] | None = None,
    pods: Sequence[Any] = (),
    served: bool = True,
    rule_controllers: dict[str, str | None] | None = None,
) -> Decision:
    view = View(
        slices=slices, pods=pods, claims=claims or {}, rules=rules, rule_controllers=rule_controllers or {}
    )
    return decide(target, outcome, view, tracks or {}, at(now), RULES_API if served else None)


def status(plan: Plan) -> dict[str, Any]:
    (apply,) = [step for step in plan.steps if isinstance(step, Apply)]
    assert apply.path == STATUS
    assert apply.body["metadata"] == {"name": "gpu-health", "uid": POLICY_UID}
    result: dict[str, Any] = apply.body["status"]
    return result


def condition(plan: Plan, type_: str) -> dict[str, Any]:
    found = find(status(plan)["conditions"], type_)
    assert found is not None
    return dict(found)


def test_a_signal_held_for_after_taints_the_device_with_a_rule_owned_by_the_policy() -> None:
    decision = run(policy(evictions_per_minute=6), slices=all_unhealthy_since(0, count=1), now=61)
    (create,) = writes(decision.plan)
    assert isinstance(create, Create)
    assert create.path == RULES
    name = taintrules.owned_rule_name("gpu-health", FOUR[0])
    assert create.body["metadata"]["name"] == name
    assert create.body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceHealthPolicy",
            "name": "gpu-health",
            "uid": POLICY_UID,
            "controller": True,
        }
    ]
    assert create.body["metadata"]["annotations"][EVICTIONS_PER_MINUTE] == "6"
    assert create.body["spec"] == {
        "deviceSelector": {"driver": GPU, "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": TAINT_KEY, "value": "Unhealthy", "effect": "NoExecute"},
    }
    assert decision.signalled_since == {name: at(0)}
    assert [e.reason for e in events(decision.plan)] == [EVENT_TAINTED]
    assert condition(decision.plan, READY)["status"] == TRUE
    active = condition(decision.plan, ACTIVE)
    assert (active["status"], active["reason"]) == (TRUE, REASON_REMEDIATING)
    assert status(decision.plan)["taintedDevices"] == 1
    assert decision.plan.result == Done()


def test_before_after_nothing_is_tainted_and_the_pass_comes_back_when_it_is_due() -> None:
    decision = run(policy(), slices=all_unhealthy_since(50, count=1), now=80)
    assert writes(decision.plan) == []
    # after (60 s) counts from the second after the taint's timeAdded: due at 111.
    assert decision.plan.result == Requeue(31.0, decision.plan.result.why)  # type: ignore[union-attr]
    assert status(decision.plan)["devices"] == [
        {
            "driver": GPU,
            "pool": "node-1",
            "device": "gpu-0",
            "state": "Signalled",
            "signalledSince": "2026-12-05T12:00:50Z",
        }
    ]


def test_after_counts_from_the_second_after_the_taints_time_added_so_it_never_fires_early() -> None:
    # timeAdded 12:00:00 may stand for a signal written at 12:00:00.9: at 60 s it is not yet due.
    early = run(policy(), slices=all_unhealthy_since(0, count=1), now=60)
    assert writes(early.plan) == []
    assert early.plan.result == Requeue(1.0, early.plan.result.why)  # type: ignore[union-attr]
    due = run(policy(), slices=all_unhealthy_since(0, count=1), now=61, tracks=dict(early.tracks))
    assert [type(w) for w in writes(due.plan)] == [Create]
    # A start with sub-second precision (the kubelet's first sight) also counts from its next second.
    assert held_from(at(0.4)) == at(1)
    assert held_from(at(0)) == at(1)


YEAR_9999 = "9999-12-31T23:59:59Z"


def test_a_slice_taint_added_in_year_9999_waits_and_the_other_devices_are_still_tainted() -> None:
    # Only key, value and effect of a slice taint are validated: a driver may write any timeAdded.
    far = device("gpu-0")
    far["taints"] = [
        {"key": HEALTH_KEY, "value": "Unhealthy", "effect": "NoSchedule", "timeAdded": YEAR_9999}
    ]
    slices = [resource_slice("node-1", far, device("gpu-1", unhealthy_since=at(0)))]
    decision = run(policy(max_unavailable=2), slices=slices, now=61)
    (create,) = writes(decision.plan)
    assert isinstance(create, Create)
    assert create.body["spec"]["deviceSelector"]["device"] == "gpu-1"
    assert decision.tracks[FOUR[0]] == Track(since=parse_time(YEAR_9999))
    assert isinstance(decision.plan.result, Requeue), "gpu-0's signal comes due at the end of time"


def test_durations_beyond_any_datetime_wait_for_ever_rather_than_fail_the_pass() -> None:
    never = run(policy(after="99999999999999h"), slices=all_unhealthy_since(0, count=1), now=61)
    assert writes(never.plan) == []
    assert isinstance(never.plan.result, Requeue)
    windowed = policy(action={"effect": "NoExecute", "tolerationSeconds": 2**62, "clearAfter": "10m"})
    first = run(windowed, slices=all_unhealthy_since(0, count=1), now=61)
    (create,) = writes(first.plan)
    assert isinstance(create, Create)
    assert create.body["spec"]["taint"]["effect"] == "NoSchedule"
    far = rule(FOUR[0], effect="NoSchedule", time_added=parse_time(YEAR_9999))
    waiting = run(windowed, slices=all_unhealthy_since(0, count=1), rules=[far], now=61)
    assert writes(waiting.plan) == [], "a rule whose timeAdded is in year 9999 keeps NoSchedule"


def test_the_guard_taints_one_and_holds_three_back_with_one_event() -> None:
    decision = run(policy(max_unavailable=1), slices=all_unhealthy_since(0), now=61)
    creates = [w for w in writes(decision.plan) if isinstance(w, Create)]
    assert [c.body["spec"]["deviceSelector"]["device"] for c in creates] == ["gpu-0"]
    assert events(decision.plan)[0].reason == EVENT_HELD_BACK
    assert status(decision.plan)["heldBackDevices"] == 3
    active = condition(decision.plan, ACTIVE)
    assert (active["status"], active["reason"]) == (TRUE, REASON_HELD_BACK)
    assert "3 devices held back by maxUnavailable 1" in active["message"]
    # The next pass, with the rule in place and the same count held back, says it no more.
    again = run(
        policy(max_unavailable=1, status=status(decision.plan)),
        slices=all_unhealthy_since(0),
        rules=[rule(FOUR[0])],
        now=62,
        tracks=dict(decision.tracks),
    )
    assert writes(again.plan) == []
    assert EVENT_HELD_BACK not in [e.reason for e in events(again.plan)]


def test_a_taken_rule_name_holds_its_device_in_conflict_without_using_a_place() -> None:
    taken: dict[str, str | None] = {taintrules.owned_rule_name("gpu-health", FOUR[0]): None}
    decision = run(
        policy(max_unavailable=1), slices=all_unhealthy_since(0, count=2), now=61, rule_controllers=taken
    )
    creates = [w for w in writes(decision.plan) if isinstance(w, Create)]
    # gpu-0's name is someone else's: gpu-1 takes the one place instead of waiting behind it.
    assert [c.body["spec"]["deviceSelector"]["device"] for c in creates] == ["gpu-1"]
    (conflict,) = [e for e in events(decision.plan) if e.reason == EVENT_RULE_CONFLICT]
    assert conflict.message == (
        f"Device {FOUR[0]} is unhealthy, but DeviceTaintRule {min(taken)} exists and is not this "
        "policy's; the device is not tainted until that rule is removed."
    )
    listed = [(d["device"], d["state"]) for d in status(decision.plan)["devices"]]
    assert listed == [("gpu-1", "Tainted"), ("gpu-0", "Conflict")]
    assert (status(decision.plan)["taintedDevices"], status(decision.plan)["heldBackDevices"]) == (1, 0)
    # The next pass, the conflict already listed, says it no more.
    again = run(
        policy(max_unavailable=1, status=status(decision.plan)),
        slices=all_unhealthy_since(0, count=2),
        rules=[rule(FOUR[1])],
        now=62,
        tracks=dict(decision.tracks),
        rule_controllers=taken,
    )
    assert writes(again.plan) == []
    assert EVENT_RULE_CONFLICT not in [e.reason for e in events(again.plan)]


def test_a_percentage_rounds_down_but_leaves_one_place() -> None:
    decision = run(policy(max_unavailable="30%"), slices=all_unhealthy_since(0), now=61)
    assert len([w for w in writes(decision.plan) if isinstance(w, Create)]) == 1
    assert decision.counts is not None
    assert decision.counts.held_back == 3


def test_quiet_for_clear_after_deletes_the_rule_with_its_uid() -> None:
    owned = rule(FOUR[0])
    quiet = run(policy(), slices=all_unhealthy_since(0, count=0), rules=[owned], now=0)
    assert writes(quiet.plan) == []
    assert quiet.plan.result == Requeue(600.0, quiet.plan.result.why)  # type: ignore[union-attr]
    cleared = run(
        policy(), slices=all_unhealthy_since(0, count=0), rules=[owned], now=610, tracks=dict(quiet.tracks)
    )
    assert writes(cleared.plan) == [Delete(f"{RULES}/{owned.metadata.name}", owned.metadata.uid)]
    assert EVENT_CLEARED in [e.reason for e in events(cleared.plan)]


def test_clear_after_never_keeps_the_rule() -> None:
    never = policy(action={"effect": "NoExecute", "clearAfter": "Never"})
    decision = run(never, rules=[rule(FOUR[0])], now=10**6, tracks={FOUR[0]: Track(quiet_since=at(0))})
    assert writes(decision.plan) == []
    assert decision.plan.result == Done()


def test_a_returning_signal_resets_the_quiet_spell() -> None:
    decision = run(
        policy(),
        slices=all_unhealthy_since(500, count=1),
        rules=[rule(FOUR[0])],
        now=700,
        tracks={FOUR[0]: Track(quiet_since=at(0))},
    )
    assert writes(decision.plan) == []
    assert decision.tracks[FOUR[0]] == Track(since=at(500))


def test_the_dry_run_writes_no_rule_and_lists_each_pod_once() -> None:
    claims = {
        ("team-a", "both"): claim(
            "both", ("gpu", "node-1", "gpu-0"), ("gpu", "node-1", "gpu-1"), pods=("trainer",)
        ),
        ("team-a", "other"): claim("other", ("gpu", "node-1", "gpu-1"), pods=("trainer", "helper")),
        ("team-a", "calm"): claim("calm", ("gpu", "node-1", "gpu-0"), pods=("tolerant",), tolerate=True),
        ("team-a", "far"): claim("far", ("gpu", "node-1", "gpu-3"), pods=("elsewhere",)),
    }
    dry = policy(action={"effect": "None"}, max_unavailable=2)
    decision = run(dry, slices=all_unhealthy_since(0, count=3), claims=claims, now=61)
    assert writes(decision.plan) == []
    assert events(decision.plan)[0].reason == EVENT_HELD_BACK
    current = status(decision.plan)
    assert current["dryRun"] == {"pods": 2, "podNames": ["team-a/helper", "team-a/trainer"]}
    assert [(d["device"], d["state"]) for d in current["devices"]] == [
        ("gpu-0", "WouldTaint"),
        ("gpu-1", "WouldTaint"),
        ("gpu-2", "HeldBack"),
    ]
    active = condition(decision.plan, ACTIVE)
    assert (active["status"], active["reason"]) == (FALSE, REASON_HELD_BACK)


def _acts_on_nothing(decision: Decision, reason: str) -> dict[str, Any]:
    assert writes(decision.plan) == []
    ready = condition(decision.plan, READY)
    assert (ready["status"], ready["reason"]) == (FALSE, reason)
    assert "the DeviceTaintRules the policy owns stay" in ready["message"]
    return ready


def test_bad_input_acts_on_nothing_keeps_the_rules_and_says_so_once() -> None:
    owned = rule(FOUR[0])
    tracks = {FOUR[0]: Track(quiet_since=at(0))}
    cases: list[tuple[HealthPolicy, Selection | Invalid, str]] = [
        (policy(signals={"after": "60s"}), SCOPE, REASON_NO_SIGNAL),
        (policy(), Invalid(REASON_INVALID_CEL, "CEL expression 'x' is invalid."), REASON_INVALID_CEL),
        (policy(max_unavailable=5), SCOPE, REASON_MAX_UNAVAILABLE_ABOVE_SCOPE),
    ]
    for target, outcome, reason in cases:
        decision = run(
            target, slices=all_unhealthy_since(0), rules=[owned], now=10**6, tracks=tracks, outcome=outcome
        )
        _acts_on_nothing(decision, reason)
        assert [e.reason for e in events(decision.plan)] == [EVENT_INVALID]
        assert decision.tracks == tracks
        assert decision.counts is None
        again = run(
            policy(**{**_kwargs(target), "status": status(decision.plan)}),
            rules=[owned],
            now=10**6,
            outcome=outcome,
        )
        assert again.plan == Plan()


def _kwargs(target: HealthPolicy) -> dict[str, Any]:
    spec = target.model_dump(by_alias=True)["spec"]
    return {"signals": spec["signals"], "max_unavailable": spec["maxUnavailable"]}


def test_without_a_rule_api_the_policy_is_not_ready() -> None:
    decision = run(policy(), slices=all_unhealthy_since(0), now=61, served=False)
    _acts_on_nothing(decision, REASON_DEVICE_TAINT_RULE_UNAVAILABLE)


def test_toleration_seconds_first_taints_no_schedule_then_no_execute() -> None:
    windowed = policy(action={"effect": "NoExecute", "tolerationSeconds": 30})
    first = run(windowed, slices=all_unhealthy_since(0, count=1), now=61)
    (create,) = writes(first.plan)
    assert isinstance(create, Create)
    assert create.body["spec"]["taint"]["effect"] == "NoSchedule"
    assert first.plan.result == Requeue(30.0, first.plan.result.why)  # type: ignore[union-attr]
    placed = rule(FOUR[0], effect="NoSchedule", time_added=at(61))
    waiting = run(windowed, slices=all_unhealthy_since(0, count=1), rules=[placed], now=80)
    assert [w for w in writes(waiting.plan) if isinstance(w, Patch)] == []
    due = run(windowed, slices=all_unhealthy_since(0, count=1), rules=[placed], now=91)
    (patch,) = writes(due.plan)
    assert isinstance(patch, Patch)
    assert patch.body["spec"]["taint"]["effect"] == "NoExecute"


def test_a_changed_pace_patches_the_rules_annotation() -> None:
    owned = rule(FOUR[0], annotations={EVICTIONS_PER_MINUTE: "6"})
    decision = run(policy(evictions_per_minute=12), slices=all_unhealthy_since(0, count=1), rules=[owned])
    assert writes(decision.plan) == [
        Patch(
            f"{RULES}/{owned.metadata.name}",
            {"metadata": {"annotations": {EVICTIONS_PER_MINUTE: "12"}}},
            uid=owned.metadata.uid,
        )
    ]
    dropped = run(policy(), slices=all_unhealthy_since(0, count=1), rules=[owned])
    (patch,) = writes(dropped.plan)
    assert patch == Patch(
        f"{RULES}/{owned.metadata.name}",
        {"metadata": {"annotations": {EVICTIONS_PER_MINUTE: None}}},
        uid=owned.metadata.uid,
    )
    assert isinstance(patch, Patch)
    assert patch.body["metadata"]["uid"] == owned.metadata.uid, "the rule read, not a namesake"


def test_the_kubelet_signal_starts_at_first_sight_and_events_reach_the_pods_and_claims() -> None:
    claims = {("team-a", "c"): claim("c", ("gpu", "node-1", "gpu-2"), pods=("trainer",))}
    reporter = pod("trainer", {"claim:gpu/gpu": [(f"{GPU}/node-1/gpu-2", "Unhealthy")]}, claims={"gpu": "c"})
    first = run(policy(), pods=[reporter], claims=claims, now=0)
    assert writes(first.plan) == []
    assert first.tracks[FOUR[2]] == Track(since=at(0))
    due = run(policy(), pods=[reporter], claims=claims, now=61, tracks=dict(first.tracks))
    assert len(writes(due.plan)) == 1
    unhealthy = [e for e in events(due.plan) if e.reason == EVENT_DEVICE_UNHEALTHY]
    assert sorted((e.ref.kind, e.ref.name) for e in unhealthy) == [("Pod", "trainer"), ("ResourceClaim", "c")]


def test_devices_outside_the_scope_are_not_signalled() -> None:
    decision = run(
        policy(), slices=all_unhealthy_since(0), now=61, outcome=Selection(devices=FOUR[:1]), tracks={}
    )
    assert decision.counts is not None
    assert decision.counts.signalled == 1
    active = condition(decision.plan, ACTIVE)
    assert active["reason"] == REASON_REMEDIATING


def test_an_idle_policy_says_so() -> None:
    decision = run(policy(), slices=all_unhealthy_since(0, count=0))
    active = condition(decision.plan, ACTIVE)
    assert (active["status"], active["reason"]) == (FALSE, REASON_IDLE)
    assert decision.plan.result == Done()


def test_conditions_change_at_the_pass_s_own_time_not_the_clock_s() -> None:
    # decide is pure: given the same input it plans the same status, wherever the clock is.
    acting = run(policy(), slices=all_unhealthy_since(0, count=0), now=100)
    assert {c["lastTransitionTime"] for c in status(acting.plan)["conditions"]} == {format_time(at(100))}
    failing = run(policy(), served=False, now=200)
    assert condition(failing.plan, READY)["lastTransitionTime"] == format_time(at(200))


def test_conflict_events_come_in_device_order_whatever_order_the_slices_were_listed_in() -> None:
    pools = [
        resource_slice(pool, device("gpu-0", unhealthy_since=at(0)))
        for pool in ("node-1", "node-2", "node-3")
    ]
    devices = [gpu(pool, "gpu-0") for pool in ("node-1", "node-2", "node-3")]
    taken: dict[str, str | None] = {taintrules.owned_rule_name("gpu-health", d): None for d in devices}
    scope = Selection(devices=tuple(devices))
    planned = [
        run(policy(max_unavailable=1), slices=order, now=61, outcome=scope, rule_controllers=taken).plan
        for order in (pools, pools[::-1])
    ]
    assert planned[0] == planned[1]
    conflicts = [e.message for e in events(planned[0]) if e.reason == EVENT_RULE_CONFLICT]
    assert [m.split()[1] for m in conflicts] == [str(d) for d in devices]
