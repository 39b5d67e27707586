"""The event routing table of spec §8: what each watch event changes and which work it queues."""

from __future__ import annotations

import pytest
from devicetaint_builders import (
    DRIVER,
    P1,
    R1,
    TAINTED,
    T,
    claim,
    delays_of,
    enqueued,
    fixture_f,
    pod,
    resource_slice,
    rule,
    seconds,
    taint,
    tolerating,
)

from operators.core.keys import POD, Key
from operators.core.models import UnparsableObject, parse
from operators.devicetaint.cache import ClusterCache
from operators.devicetaint.models import RULE, Pod, ResourceClaim

# --- Claims ------------------------------------------------------------------------------------------


def test_claim_allocation_appearing_evaluates_reserved_pods() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    state.apply_pod(pod(), T)
    assert enqueued(state.apply_claim(claim(allocated=False), T)) == []
    assert enqueued(state.apply_claim(claim(), T)) == [(P1, 0.0)]
    assert state.scheduled_eviction(P1) is not None


def test_claim_unchanged_projection_triggers_nothing() -> None:
    state = fixture_f(TAINTED)
    assert enqueued(state.apply_claim(claim(), T)) == []


def test_claim_losing_the_reservation_cancels() -> None:
    state = fixture_f(TAINTED)
    effects = state.apply_claim(claim(reserved_for=[]), T)
    assert effects.cancelled == [P1]
    assert state.scheduled_eviction(P1) is None


def test_claim_deallocated_or_deleted_cancels() -> None:
    state = fixture_f(TAINTED)
    assert state.apply_claim(claim(allocated=False), T).cancelled == [P1]
    state = fixture_f(TAINTED)
    assert state.delete_claim(claim(), T).cancelled == [P1]


def test_claim_with_new_uid_is_delete_then_add() -> None:
    state = fixture_f(TAINTED)
    effects = state.apply_claim(claim(uid="NEW"), T)
    assert effects.cancelled == [P1]
    assert enqueued(effects) == [(P1, 0.0)]
    assert state.scheduled_eviction(P1) is not None


def test_claim_reservation_for_other_pod_instance_is_ignored() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    state.apply_pod(pod(uid="U2"), T)
    assert enqueued(state.apply_claim(claim(), T)) == []


def test_podgroup_consumers_are_ignored_where_podgroup_claims_are_off() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    state.apply_pod(pod(), T)
    group = claim().model_copy(deep=True)
    body = group.model_dump(by_alias=True)
    body["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "p1", "uid": "U1"}
    ]
    parsed = type(group).model_validate(body)
    assert parsed.reserved_pod_names() == set()
    assert enqueued(state.apply_claim(parsed, T)) == []


def test_every_member_of_a_podgroup_on_a_tainted_device_is_evicted() -> None:
    """Upstream finds a group's members through its pods-by-PodGroup index; a member that joins
    later is evaluated as it arrives, and one that leaves is forgotten."""
    state = ClusterCache()
    state.workload_claims = True
    state.apply_slice(resource_slice(taints=TAINTED), T)
    entry = [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
    status = [{"name": "gpu", "resourceClaimName": "gang-gpu"}]
    first = pod(name="m1", uid="M1", claims=entry, statuses=status, group="gang")
    second = pod(name="m2", uid="M2", claims=entry, statuses=status, group="gang")
    state.apply_pod(first, T)
    state.apply_pod(second, T)
    shared = claim(name="gang-gpu", group="gang")
    assert sorted(enqueued(state.apply_claim(shared, T)), key=str) == [
        (Key(POD, "ns1", "m1", "M1"), 0.0),
        (Key(POD, "ns1", "m2", "M2"), 0.0),
    ]
    late = pod(name="m3", uid="M3", claims=entry, statuses=status, group="gang")
    assert enqueued(state.apply_pod(late, T)) == [(Key(POD, "ns1", "m3", "M3"), 0.0)]
    state.delete_pod(second)
    # A rule on every device would evict the two members left, the one that left not.
    assert state.rule_counts(rule(selector={})).pending_pods == 2


# --- Slices ------------------------------------------------------------------------------------------


def test_slice_taint_change_reevaluates_only_users_of_changed_devices() -> None:
    state = fixture_f()
    assert enqueued(state.apply_slice(resource_slice(taints={"gpu-1": [taint()]}), T)) == []
    assert enqueued(state.apply_slice(resource_slice(taints={"gpu-0": [taint()]}), T)) == [(P1, 0.0)]


def test_slice_non_evicting_taint_triggers_nothing() -> None:
    state = fixture_f()
    effects = state.apply_slice(resource_slice(taints={"gpu-0": [taint("NoSchedule")]}), T)
    assert enqueued(effects) == []
    assert effects.cancelled == []


def test_slice_taint_removed_cancels() -> None:
    state = fixture_f(TAINTED, tolerations=[tolerating(60)])
    assert state.apply_slice(resource_slice(), T + seconds(10)).cancelled == [P1]


def test_slice_same_taint_again_changes_nothing() -> None:
    state = fixture_f(TAINTED)
    assert enqueued(state.apply_slice(resource_slice(taints=TAINTED), T)) == []


def test_slice_deleted_drops_its_taints() -> None:
    state = fixture_f(TAINTED)
    assert state.delete_slice(resource_slice(), T).cancelled == [P1]


def test_slice_moving_pools_updates_both() -> None:
    state = fixture_f(TAINTED)
    moved = resource_slice(pool="node-2", taints=TAINTED)
    assert state.apply_slice(moved, T).cancelled == [P1]


def test_slice_undated_taint_warns_once_per_generation() -> None:
    state = ClusterCache()
    undated = resource_slice(taints={"gpu-0": [taint(time_added=None)]})
    first = state.apply_slice(undated, T)
    assert first.warnings == [
        "ResourceSlice node-1-slice: NoExecute taint without timeAdded ignored on device(s) gpu-0"
    ]
    assert state.apply_slice(undated, T).warnings == []


# --- Rules -------------------------------------------------------------------------------------------


def test_rule_added_queues_status_first_then_pods() -> None:
    state = fixture_f()
    effects = state.apply_rule(rule(selector={"driver": DRIVER}), T)
    assert enqueued(effects) == [(R1, 0.0), (P1, 0.0), (R1, 10.0)]


def test_rule_status_only_change_triggers_nothing() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    condition = {
        "type": "EvictionInProgress",
        "status": "True",
        "reason": "PodsPendingEviction",
        "message": "1 pod needs to be evicted in 1 namespace.",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-03-01T12:00:00Z",
    }
    effects = state.apply_rule(rule(selector={}, conditions=[condition]), T)
    assert enqueued(effects) == []
    assert effects.cancelled == []


def test_rule_spec_change_queues_status_now() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"device": "gpu-9"}), T)
    effects = state.apply_rule(rule(generation=2, selector={"device": "gpu-0"}), T)
    assert enqueued(effects)[0] == (R1, 0.0)
    assert (P1, 0.0) in enqueued(effects)


def test_none_rule_does_not_recompute_claims() -> None:
    state = fixture_f()
    assert enqueued(state.apply_rule(rule(effect="None", selector={}), T)) == [(R1, 0.0)]


def test_rule_deleted_forgets_count_and_cancels() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    state.apply_pod(pod(name="p1"), T)
    effects = state.delete_rule(rule(selector={}), T)
    assert effects.cancelled == [P1]
    assert state.evicted_count("R1") == 0


def test_rule_with_new_uid_is_delete_then_add() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    effects = state.apply_rule(rule(uid="R2", selector={}), T)
    items = [item for item, _ in enqueued(effects)]
    assert items[0] == Key(RULE, "", "example", "R2")
    assert state.scheduled_eviction(P1) is not None


def test_rule_undated_warns_once() -> None:
    state = fixture_f()
    assert state.apply_rule(rule(selector={}, time_added=None), T).warnings == [
        "DeviceTaintRule example: NoExecute taint without timeAdded ignored"
    ]
    assert state.apply_rule(rule(selector={"driver": DRIVER}, time_added=None), T).warnings == []
    assert state.scheduled_eviction(P1) is None


def test_clear_rules_when_the_api_goes_away() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    assert state.clear_rules(T).cancelled == [P1]
    assert state.rule_names() == []


# --- Pods --------------------------------------------------------------------------------------------


def test_pod_added_is_evaluated_with_rule_items_delayed() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    state.apply_rule(rule(selector={"device": "gpu-0"}), T)
    state.apply_claim(claim(tolerations=[tolerating(30)]), T)
    effects = state.apply_pod(pod(), T + seconds(10))
    assert enqueued(effects) == [(P1, 20.0), (R1, 10.0)]


def test_pod_status_noise_triggers_nothing() -> None:
    state = fixture_f(TAINTED)
    conditions = [{"type": "DisruptionTarget", "status": "True"}, {"type": "Ready", "status": "False"}]
    marked = pod(conditions=conditions)
    assert enqueued(state.apply_pod(marked, T)) == []
    assert enqueued(state.apply_pod(pod(deleting=True), T)) == []


def test_pod_claim_inputs_changes_reevaluate() -> None:
    state = fixture_f(TAINTED)
    assert state.apply_pod(pod(node=""), T).cancelled == [P1]
    assert enqueued(state.apply_pod(pod(), T)) == [(P1, 0.0)]
    assert delays_of(state.apply_pod(pod(extended="c-ext"), T), P1) == [0.0]


def test_pod_deleted_drops_schedule_without_event() -> None:
    state = fixture_f(TAINTED)
    effects = state.delete_pod(pod())
    assert effects.cancelled == []
    assert state.scheduled_eviction(P1) is None


def test_pod_replaced_under_same_name_drops_old_schedule_silently() -> None:
    state = fixture_f(TAINTED)
    effects = state.apply_pod(pod(uid="U2"), T)
    assert effects.cancelled == []
    assert enqueued(effects) == []
    assert state.scheduled_eviction(P1) is None


def test_pod_without_claims_is_not_cached() -> None:
    state = fixture_f(TAINTED)
    state.apply_pod(pod(name="plain", uid="UP", claims=[]), T)
    assert state.scheduled_eviction(Key(POD, "ns1", "plain", "UP")) is None


# --- Parsing -----------------------------------------------------------------------------------------


def test_unparsable_object_names_its_reference() -> None:
    body = {"kind": "Pod", "metadata": {"namespace": "ns1", "name": "bad"}, "spec": {"resourceClaims": [{}]}}
    with pytest.raises(UnparsableObject, match=r"^Pod ns1/bad: 1 invalid field"):
        parse(Pod, body)


def test_null_lists_read_as_empty() -> None:
    body = {
        "metadata": {"name": "c1", "namespace": "ns1", "uid": "C1", "ownerReferences": None},
        "status": {"allocation": {"devices": {"results": None}}, "reservedFor": None},
    }
    parsed = parse(ResourceClaim, body)
    assert parsed.results == ()
    assert parsed.status.reserved_for == ()


def test_projections_drop_unread_conditions() -> None:
    conditions = [{"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}]
    assert [c.type for c in pod(conditions=conditions).status.conditions] == ["DisruptionTarget"]
    other = {"type": "Other", "status": "True", "reason": "X"}
    assert rule(conditions=[other]).eviction_condition is None
