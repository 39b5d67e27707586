"""One pod work item (spec §9, with the cached pod instead of a GET): the decision and the write bodies."""

from __future__ import annotations

from devicetaint_builders import P1, T, fixture_f, pod, seconds, taint

from operators.core.keys import POD, Key
from operators.devicetaint.evaluation import PodEviction, RuleTaintReason
from operators.devicetaint.podeviction import (
    EVICTED_LRU_SIZE,
    EvictionResult,
    PodDone,
    PodEvict,
    PodNotYet,
    decide_pod,
    delete_options,
    disruption_target_patch,
)
from operators.dra.taints import Eviction

DUE: PodEviction = Eviction(T, frozenset({RuleTaintReason("example", "R1")}))
OUR_CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByDeviceTaintManager",
    "message": "Device Taint manager: deleting due to NoExecute taint",
}


def test_nothing_scheduled() -> None:
    assert decide_pod(P1, None, False, pod(), T) == PodDone("no eviction scheduled")


def test_already_evicted() -> None:
    assert decide_pod(P1, DUE, True, pod(), T) == PodDone("already evicted")


def test_not_yet_due_requeues_for_the_remainder() -> None:
    later: PodEviction = Eviction(T + seconds(20), DUE.reasons)
    assert decide_pod(P1, later, False, pod(), T + seconds(5)) == PodNotYet(15.0)


def test_vanished_or_replaced_pod_is_forgotten() -> None:
    assert decide_pod(P1, DUE, False, None, T) == PodDone("pod no longer cached", forget=True)
    replaced = decide_pod(P1, DUE, False, pod(uid="U2"), T)
    assert replaced == PodDone("pod replaced under the same name", forget=True)


def test_due_pod_is_evicted_with_uid_preconditions() -> None:
    decision = decide_pod(P1, DUE, False, pod(), T + seconds(3))
    assert decision == PodEvict(
        item=P1,
        eviction=DUE,
        already_terminating=False,
        status_patch={
            "metadata": {"uid": "U1"},
            "status": {"conditions": [{**OUR_CONDITION, "lastTransitionTime": "2026-03-01T12:00:03Z"}]},
        },
        delete_options={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "U1"}},
    )


def test_terminating_pod_counts_without_writes() -> None:
    decision = decide_pod(P1, DUE, False, pod(deleting=True), T)
    assert isinstance(decision, PodEvict)
    assert decision.already_terminating


def test_patch_skipped_when_our_condition_is_there() -> None:
    assert disruption_target_patch(pod(conditions=[OUR_CONDITION]), T) is None


def test_patch_keeps_transition_time_of_a_true_condition() -> None:
    foreign = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "Other",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    patch = disruption_target_patch(pod(conditions=[foreign]), T)
    assert patch is not None
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert patch["status"]["conditions"][0]["reason"] == "DeletionByDeviceTaintManager"


def test_patch_sets_now_when_condition_was_false() -> None:
    false = {**OUR_CONDITION, "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    patch = disruption_target_patch(pod(conditions=[false]), T)
    assert patch is not None
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "2026-03-01T12:00:00Z"


def test_delete_options() -> None:
    assert delete_options("U9") == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "U9"},
    }


def test_evicted_pod_is_not_scheduled_again_and_never_cancelled() -> None:
    state = fixture_f({"gpu-0": [taint()]})
    decision = state.decide_pod(P1, T)
    assert isinstance(decision, PodEvict)
    state.finish_pod(decision, EvictionResult.EVICTED, T)
    assert state.apply_pod(pod(node="elsewhere"), T).enqueue == []
    assert state.apply_pod(pod(node=""), T).cancelled == []


def test_evicted_lru_keeps_the_most_recent() -> None:
    state = fixture_f({"gpu-0": [taint()]})
    first = state.decide_pod(P1, T)
    assert isinstance(first, PodEvict)
    state.finish_pod(first, EvictionResult.EVICTED, T)
    for index in range(EVICTED_LRU_SIZE):
        other = PodEvict(Key(POD, "ns1", f"x{index}", f"X{index}"), DUE, False, None, {})
        state.finish_pod(other, EvictionResult.GONE, T)
    # U1 fell out of the LRU: a new evaluation schedules it again.
    assert [e.item for e in state.apply_pod(pod(node="elsewhere"), T).enqueue] == [P1]


def test_status_patch_is_not_repeated_when_only_the_delete_failed() -> None:
    state = fixture_f(slice_taints={"gpu-0": [taint()]})
    first = state.decide_pod(P1, T + seconds(1))
    assert isinstance(first, PodEvict)
    assert first.status_patch is not None
    state.pod_status_patched(first)
    retry = state.decide_pod(P1, T + seconds(2))
    assert isinstance(retry, PodEvict)
    assert retry.status_patch is None


def test_status_patch_overlay_leaves_a_replacement_alone() -> None:
    state = fixture_f(slice_taints={"gpu-0": [taint()]})
    first = state.decide_pod(P1, T + seconds(1))
    assert isinstance(first, PodEvict)
    state.apply_pod(pod(uid="U2"), T + seconds(1))
    state.pod_status_patched(first)
    replacement = state.cached_pod("ns1", "p1")
    assert replacement is not None
    assert replacement.status.conditions == ()
