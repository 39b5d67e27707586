"""One pod work item (spec §9, with the cached pod instead of a GET): the decision and the write bodies."""

from __future__ import annotations

from devicetaint_builders import P1, T, fixture_f, pod, seconds, taint

from operators.core.client import STRATEGIC_MERGE_PATCH, ApiError
from operators.core.events import NORMAL
from operators.core.keys import POD, Key
from operators.core.plan import Delete, Evict, Patch, Plan, RecordEvent
from operators.core.reconcile import Done, Requeue
from operators.devicetaint.evaluation import PodEviction, RuleTaintReason
from operators.devicetaint.podeviction import (
    EVICTED_LRU_SIZE,
    BudgetRefusal,
    EvictionEnds,
    EvictionResult,
    PodDone,
    PodEvict,
    PodNotYet,
    budget_refusal,
    decide_pod,
    disruption_target_patch,
    pod_plan,
    pod_ref,
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
            "status": {"conditions": [{**OUR_CONDITION, "lastTransitionTime": "2026-03-01T12:00:03Z"}]},
        },
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


# --- The plans: what the worker sends for each decision -------------------------------------------------

POD_PATH = "/api/v1/namespaces/ns1/pods/p1"
MARKING = RecordEvent(pod_ref(P1), NORMAL, "DeviceTaintManagerEviction", "Marking for deletion")
BUDGET_STATUS = {
    "details": {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget keep-one needs 1 healthy pods and has 1 currently",
            }
        ]
    }
}


def test_nothing_to_send_before_or_after_an_eviction() -> None:
    assert pod_plan(PodDone("already evicted"), eviction_api=False, refusals=0) == Plan()
    assert pod_plan(PodNotYet(15.0), eviction_api=False, refusals=0) == Plan(
        result=Requeue(15.0, "eviction not due yet")
    )
    terminating = decide_pod(P1, DUE, False, pod(deleting=True), T)
    assert pod_plan(terminating, eviction_api=False, refusals=0) == Plan()
    assert pod_plan(terminating, eviction_api=True, refusals=0) == Plan()


def test_a_due_pod_is_marked_patched_and_deleted_with_its_uid() -> None:
    decision = decide_pod(P1, DUE, False, pod(), T)
    assert isinstance(decision, PodEvict)
    plan = pod_plan(decision, eviction_api=False, refusals=0)
    (marking, patch, delete), result = plan.steps, plan.result
    assert (marking, result) == (MARKING, Done())
    assert patch == Patch(
        f"{POD_PATH}/status",
        decision.status_patch or {},
        STRATEGIC_MERGE_PATCH,
        tolerate=frozenset(),
        ends={404: Done()},
        uid="U1",
    )
    assert isinstance(patch, Patch)
    assert patch.body["metadata"] == {"uid": "U1"}, "the pod read, not a namesake"
    assert delete == Delete(POD_PATH, "U1", tolerate=frozenset(), ends={404: Done()})


def test_no_status_patch_when_our_condition_is_there() -> None:
    decision = decide_pod(P1, DUE, False, pod(conditions=[OUR_CONDITION]), T)
    assert isinstance(decision, PodEvict)
    steps = pod_plan(decision, eviction_api=False, refusals=0).steps
    assert steps == (MARKING, Delete(POD_PATH, "U1", tolerate=frozenset(), ends={404: Done()}))


def test_the_eviction_api_is_asked_first_and_marking_follows_its_acceptance() -> None:
    decision = decide_pod(P1, DUE, False, pod(), T)
    assert isinstance(decision, PodEvict)
    plan = pod_plan(decision, eviction_api=True, refusals=2)
    assert plan == Plan(
        (Evict("ns1", "p1", "U1", tolerate=frozenset(), ends=EvictionEnds(refusals=2)), MARKING)
    )


def test_eviction_api_answers_that_end_the_plan() -> None:
    ends = EvictionEnds(refusals=2)
    assert ends(ApiError(404, "NotFound", "gone")) == Done()
    refused = ApiError(429, "TooManyRequests", "budget", None, BUDGET_STATUS)
    assert ends(refused) == Requeue(4.0, "PodDisruptionBudget"), "the third refusal in a row"
    assert budget_refusal(ApiError(429, "TooManyRequests", "budget", 10.0, BUDGET_STATUS)) == BudgetRefusal(
        "keep-one", "The disruption budget keep-one needs 1 healthy pods and has 1 currently", 10.0
    )
    assert ends(ApiError(429, "TooManyRequests", "busy", 1.0, {})) is None
    assert ends(ApiError(409, "Conflict", "uid precondition")) is None


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
        other = PodEvict(Key(POD, "ns1", f"x{index}", f"X{index}"), DUE, False, None)
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
