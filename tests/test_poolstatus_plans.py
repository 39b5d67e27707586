"""The plans of the pool-status operator: a request's evaluation and an expired request's deletion."""

from __future__ import annotations

from operators.core.plan import Delete, Patch, Plan
from operators.core.reconcile import Done, Requeue
from operators.poolstatus.plans import ALREADY_GONE, NAME_REUSED, expiry_plan, request_plan
from operators.poolstatus.status import Completed, Deferred

STATUS_PATH = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests/r/status"
REQUEST_PATH = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests/r"


def test_a_deferred_request_writes_nothing_and_comes_back_after_its_delay() -> None:
    plan = request_plan(STATUS_PATH, "7", Deferred(retry_after=2.5, incomplete_listed=3))
    assert plan == Plan((), Requeue(2.5, "3 listed pools incomplete"))


def test_a_completed_request_is_one_status_patch_guarded_by_the_version_read() -> None:
    status = {"poolCount": 1, "pools": [{"driver": "gpu.example.com", "poolName": "p", "generation": 1}]}
    completed = Completed(
        status, result="complete", pool_count=1, listed=1, incomplete=0, validation_prefixes=()
    )
    plan = request_plan(STATUS_PATH, "7", completed)
    assert plan == Plan(
        (Patch(STATUS_PATH, {"metadata": {"resourceVersion": "7"}, "status": status}, tolerate=frozenset()),),
        Done(),
    )
    [write] = plan.steps
    assert isinstance(write, Patch)
    assert not write.ends, "every failure goes back to the sync, which needs the error for its follow-up"


def test_an_expired_request_is_deleted_in_the_background_if_it_is_still_the_same_one() -> None:
    plan = expiry_plan(REQUEST_PATH, "uid-r")
    assert plan == Plan(
        (
            Delete(
                REQUEST_PATH,
                "uid-r",
                propagation="Background",
                tolerate=frozenset(),
                ends={404: ALREADY_GONE, 409: NAME_REUSED},
            ),
        ),
        Done(),
    )
    assert plan.result not in (ALREADY_GONE, NAME_REUSED), "the sync counts only a real deletion"
