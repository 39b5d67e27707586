"""The ``claim:`` sync (spec section 8): its plans and the acceptance scenarios it decides."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from resourceclaim_builders import (
    FINALIZER,
    DeleteClaim,
    Failed,
    FakeApi,
    GetPod,
    PutClaim,
    PutClaimStatus,
    cache_with,
    make_claim,
    make_pod,
    named_entry,
    pod_consumer,
    pod_group_consumer,
    pod_group_owner,
    template_entry,
)

from operators.core.client import ApiError
from operators.core.keys import CLAIM, POD, Key
from operators.core.plan import Delete, Plan, Replace
from operators.core.reconcile import Done, Retry
from operators.dra.podgroups import POD_GROUPS
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.claim_sync import (
    delete_unused,
    release,
    remaining_consumers,
    sync_claim,
    unprotect,
)

WIDGET = {"apiGroup": "example.com", "resource": "widgets", "name": "w", "uid": "W"}
POD_GROUP = pod_group_consumer("g", "G")


def run_claim_sync(cache: ClusterCache, api: FakeApi, name: str) -> Any:
    return api.run(sync_claim(cache, "demo", name, api, POD_GROUPS))


def generated_pod(phase: str = "Running", *, name: str = "my-pod", uid: str = "U", **kwargs: Any) -> Any:
    """A scheduled pod whose claim for the entry gpu was generated from the template gpu-tmpl."""
    return make_pod(
        name,
        uid,
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "gpu", "resourceClaimName": f"{name}-gpu-abcde"}],
        node_name="node-1",
        phase=phase,
        **kwargs,
    )


def generated_claim(pod: tuple[str, str] = ("my-pod", "U"), uid: str = "C", **overrides: Any) -> Any:
    """The allocated claim generated for ``pod`` (name, UID) from the template entry gpu, reserved
    for that pod."""
    fields: dict[str, Any] = {
        "owner": pod,
        "entry": "gpu",
        "allocated": True,
        "finalizers": [FINALIZER],
        "reserved_for": [pod_consumer(*pod)],
    }
    return make_claim(f"{pod[0]}-gpu-abcde", uid, **{**fields, **overrides})


def assert_released_and_deleted(api: FakeApi, name: str, uid: str) -> None:
    """Scenario 16's order: status PUT, finalizer PUT, DELETE with UID precondition."""
    status_put, finalizer_put, delete = api.writes()
    assert isinstance(status_put, PutClaimStatus)
    assert status_put.name == name
    assert status_put.body["status"]["reservedFor"] == []
    assert "allocation" not in status_put.body["status"]
    assert status_put.body["metadata"]["resourceVersion"] == "42"
    assert isinstance(finalizer_put, PutClaim)
    assert FINALIZER not in finalizer_put.body["metadata"]["finalizers"]
    assert finalizer_put.body["metadata"]["resourceVersion"] == "43"  # based on the returned object
    assert delete == DeleteClaim("demo", name, uid)


def assert_released_and_unfinalized(api: FakeApi) -> None:
    """The claim's writes: a status PUT freeing it of every reservation and its allocation, then a
    PUT leaving it no finalizer; nothing else."""
    status_put, finalizer_put = api.writes()
    assert isinstance(status_put, PutClaimStatus)
    assert status_put.body["status"]["reservedFor"] == []
    assert "allocation" not in status_put.body["status"]
    assert isinstance(finalizer_put, PutClaim)
    assert finalizer_put.body["metadata"]["finalizers"] == []


def test_absent_claim_needs_nothing() -> None:
    api = FakeApi()
    assert run_claim_sync(cache_with(), api, "nope") == Done("claim is gone")
    assert api.actions == []


def test_scenario_16_pod_completes() -> None:
    pod = generated_pod()
    cache = cache_with(pods=[pod], claims=[generated_claim()])
    # The pod's phase becomes Succeeded: the event routes the claim.
    assert cache.apply_pod_event("MODIFIED", generated_pod(phase="Succeeded")) == [
        Key(CLAIM, "demo", "my-pod-gpu-abcde")
    ]
    api = FakeApi()
    assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Done("deleted unused generated claim")
    assert_released_and_deleted(api, "my-pod-gpu-abcde", "C")


def test_finalizer_put_keeps_other_finalizers() -> None:
    claim = generated_claim(finalizers=["example.com/keep", FINALIZER])
    cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[claim])
    api = FakeApi()
    run_claim_sync(cache, api, "my-pod-gpu-abcde")
    [finalizer_put] = api.of_type(PutClaim)
    assert finalizer_put.body["metadata"]["finalizers"] == ["example.com/keep"]


def test_scenario_17_one_of_two_pods_removed() -> None:
    p1 = make_pod("p1", "P1", claims=[named_entry("gpu", "shared")], node_name="n", phase="Running")
    p2 = make_pod("p2", "P2", claims=[named_entry("gpu", "shared")], node_name="n", phase="Running")
    shared = make_claim(
        "shared",
        allocated=True,
        finalizers=[FINALIZER],
        reserved_for=[pod_consumer("p1", "P1"), pod_consumer("p2", "P2")],
    )
    cache = cache_with(pods=[p1, p2], claims=[shared])
    assert cache.apply_pod_event("DELETED", p2) == [Key(CLAIM, "demo", "shared")]
    api = FakeApi()
    assert run_claim_sync(cache, api, "shared") == Done("claim is still in use")
    [put] = api.writes()
    assert isinstance(put, PutClaimStatus)
    assert put.body["status"]["reservedFor"] == [pod_consumer("p1", "P1")]
    assert put.body["status"]["allocation"] == shared.body["status"]["allocation"]
    assert api.of_type(GetPod) == []


def test_scenario_18_last_consumer_of_user_claim_gone() -> None:
    p1 = make_pod("p1", "P1", claims=[named_entry("gpu", "shared")], node_name="n", phase="Running")
    shared = make_claim(
        "shared", allocated=True, finalizers=[FINALIZER], reserved_for=[pod_consumer("p1", "P1")]
    )
    cache = cache_with(pods=[p1], claims=[shared])
    cache.apply_pod_event("DELETED", p1)
    api = FakeApi()
    assert run_claim_sync(cache, api, "shared") == Done("claim is not controlled by a pod")
    assert_released_and_unfinalized(api)


def test_scenario_19_unknown_consumer_kind_is_kept() -> None:
    claim = make_claim(
        "shared", allocated=True, finalizers=[FINALIZER], reserved_for=[WIDGET, pod_consumer("gone", "X")]
    )
    cache = cache_with(claims=[claim])
    api = FakeApi()
    assert run_claim_sync(cache, api, "shared") == Done("claim is still in use")
    assert api.of_type(GetPod) == [GetPod("demo", "gone")]
    [put] = api.writes()
    assert isinstance(put, PutClaimStatus)
    assert put.body["status"]["reservedFor"] == [WIDGET]
    assert "allocation" in put.body["status"]
    assert put.body["metadata"]["finalizers"] == [FINALIZER]


def test_scenario_20_pod_group_entry_is_never_removed() -> None:
    claim = make_claim("shared", allocated=True, finalizers=[FINALIZER], reserved_for=[POD_GROUP])
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    assert api.actions == []


def test_unknown_fields_of_kept_entries_survive_the_put() -> None:
    odd = {**WIDGET, "futureField": "v"}
    claim = make_claim("shared", allocated=True, reserved_for=[odd, pod_consumer("gone", "X")])
    cache = cache_with(claims=[claim])
    cache.apply_pod_event("DELETED", make_pod("gone", "X", claims=[named_entry("gpu", "shared")]))
    api = FakeApi()
    run_claim_sync(cache, api, "shared")
    [put] = api.writes()
    assert put.body["status"]["reservedFor"] == [odd]


def test_scenario_21_deleted_before_scheduling() -> None:
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}],
    )
    claim = generated_claim()
    cache = cache_with(pods=[pod], claims=[claim])
    deleting = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}],
        deleting=True,
    )
    assert cache.apply_pod_event("MODIFIED", deleting) == [Key(CLAIM, "demo", "my-pod-gpu-abcde")]
    api = FakeApi()
    run_claim_sync(cache, api, "my-pod-gpu-abcde")
    assert_released_and_deleted(api, "my-pod-gpu-abcde", "C")


def test_scenario_22_deleted_while_scheduled_keeps_reservation() -> None:
    cache = cache_with(pods=[generated_pod(deleting=True)], claims=[generated_claim()])
    api = FakeApi()
    assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Done("claim is still in use")
    assert api.actions == []

    # Then the pod is removed.
    cache.apply_pod_event("DELETED", generated_pod(deleting=True))
    api = FakeApi()
    run_claim_sync(cache, api, "my-pod-gpu-abcde")
    status_put, finalizer_put = api.writes()
    assert isinstance(status_put, PutClaimStatus)
    assert isinstance(finalizer_put, PutClaim)
    # The pod is gone from the cache: the garbage collector deletes the claim.
    assert api.of_type(DeleteClaim) == []


def test_scenario_23_unknown_pod_removed_after_live_get() -> None:
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer("ghost", "G"), WIDGET])
    cache = cache_with(claims=[claim])
    api = FakeApi()
    run_claim_sync(cache, api, "shared")
    assert api.of_type(GetPod) == [GetPod("demo", "ghost")]
    [put] = api.writes()
    assert put.body["status"]["reservedFor"] == [WIDGET]


@pytest.mark.parametrize("name", [".", "..", "web-0/status", ".?watch=true", "Web-0", "web%2F0"])
def test_a_reserved_name_no_pod_can_have_is_gone_without_a_request(name: str) -> None:
    """A tenant who may write reservedFor writes any name: pasted into a path, ``.`` would list
    every pod of the namespace, ``web-0/status`` read another object, ``.?watch=true`` hold a
    worker on a watch."""
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer(name, "G"), WIDGET])
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    assert api.of_type(GetPod) == []
    [put] = api.writes()
    assert put.body["status"]["reservedFor"] == [WIDGET]


def test_unknown_pod_that_exists_live_is_kept() -> None:
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer("new", "N")])
    api = FakeApi()
    api.live_pods = {"new": "N"}
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    assert api.writes() == []


def test_unknown_pod_replaced_live_is_dropped() -> None:
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer("web-0", "OLD")])
    api = FakeApi()
    api.live_pods = {"web-0": "NEW"}
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    [put] = api.writes()
    assert put.body["status"]["reservedFor"] == []


def test_live_get_failure_is_retried_without_writes() -> None:
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer("ghost", "G")])
    api = FakeApi()
    api.fail(GetPod, Failed(503, "unavailable"))
    assert run_claim_sync(cache_with(claims=[claim]), api, "shared") == Retry(
        "get pod demo/ghost: unavailable"
    )
    assert api.writes() == []


def test_scenario_24_replaced_pod() -> None:
    old = generated_pod()
    cache = cache_with(pods=[old], claims=[generated_claim()])
    cache.apply_pod_event("DELETED", old)
    new = make_pod("my-pod", "U2", claims=[template_entry("gpu", "gpu-tmpl")])
    assert cache.apply_pod_event("ADDED", new) == [Key(POD, "demo", "my-pod")]

    api = FakeApi()
    run_claim_sync(cache, api, "my-pod-gpu-abcde")
    assert_released_and_deleted(api, "my-pod-gpu-abcde", "C")
    # The new pod has no generated claim of its own yet, so its sync creates one.
    assert cache.find_generated_claim("demo", "U2", "gpu") is None


def test_replaced_pod_in_cache_drops_entry_without_lru() -> None:
    new = make_pod("my-pod", "U2", claims=[template_entry("gpu", "gpu-tmpl")], node_name="node-1")
    cache = cache_with(pods=[new], claims=[generated_claim()])
    api = FakeApi()
    run_claim_sync(cache, api, "my-pod-gpu-abcde")
    assert_released_and_deleted(api, "my-pod-gpu-abcde", "C")
    assert api.of_type(GetPod) == []


def test_scenario_25_extended_resource_claim() -> None:
    pod = make_pod("p", "U", node_name="node-1", phase="Running", extended_claim="p-extended-resources-abcde")
    claim = make_claim(
        "p-extended-resources-abcde",
        "E",
        owner=("p", "U"),
        annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
        allocated=True,
        finalizers=[FINALIZER],
        reserved_for=[pod_consumer("p", "U")],
    )
    cache = cache_with(pods=[pod], claims=[claim])
    failed = make_pod(
        "p", "U", node_name="node-1", phase="Failed", extended_claim="p-extended-resources-abcde"
    )
    assert cache.apply_pod_event("MODIFIED", failed) == [Key(CLAIM, "demo", "p-extended-resources-abcde")]
    api = FakeApi()
    run_claim_sync(cache, api, "p-extended-resources-abcde")
    assert_released_and_deleted(api, "p-extended-resources-abcde", "E")


def test_scenario_26_claim_being_deleted() -> None:
    claim = make_claim("shared", allocated=True, finalizers=[FINALIZER], deleting=True)
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    status_put, finalizer_put = api.writes()
    assert isinstance(status_put, PutClaimStatus)
    assert "allocation" not in status_put.body["status"]
    assert isinstance(finalizer_put, PutClaim)
    assert finalizer_put.body["metadata"]["finalizers"] == []
    assert finalizer_put.body["metadata"]["resourceVersion"] == "43"


def test_unallocated_claim_being_deleted_only_loses_the_finalizer() -> None:
    claim = make_claim("shared", finalizers=[FINALIZER], deleting=True)
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    [finalizer_put] = api.writes()
    assert isinstance(finalizer_put, PutClaim)
    assert finalizer_put.body["metadata"]["resourceVersion"] == "42"


def test_scenario_27_allocated_never_used_is_not_deallocated() -> None:
    claim = make_claim("shared", allocated=True, finalizers=[FINALIZER])
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "shared")
    assert api.actions == []


def test_scenario_28_conflict_is_retried_without_further_writes() -> None:
    cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[generated_claim()])
    api = FakeApi()
    api.fail(PutClaimStatus, Failed(409, "the object has been modified; please apply your changes"))
    outcome = run_claim_sync(cache, api, "my-pod-gpu-abcde")
    assert outcome == Retry(
        "update status of claim demo/my-pod-gpu-abcde: "
        "the object has been modified; please apply your changes"
    )
    assert len(api.writes()) == 1

    retry = FakeApi()
    run_claim_sync(cache, retry, "my-pod-gpu-abcde")
    assert_released_and_deleted(retry, "my-pod-gpu-abcde", "C")


def test_finalizer_put_failure_is_retried() -> None:
    cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[generated_claim()])
    api = FakeApi()
    api.fail(PutClaim, Failed(500, "boom"))
    assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Retry(
        "remove finalizer from claim demo/my-pod-gpu-abcde: boom"
    )
    assert api.of_type(DeleteClaim) == []


def test_writes_to_a_claim_that_is_gone_end_the_sync() -> None:
    """The cache may not have seen the deletion yet; a 404 needs no retry."""
    for failing in (PutClaimStatus, PutClaim):
        cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[generated_claim()])
        api = FakeApi()
        api.fail(failing, Failed(404, 'resourceclaims.resource.k8s.io "my-pod-gpu-abcde" not found'))
        assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Done("claim is gone")
        assert api.of_type(DeleteClaim) == []


def test_delete_404_counts_as_success_and_other_errors_are_retried() -> None:
    claim = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[claim])
    api = FakeApi()
    api.fail(DeleteClaim, Failed(404, "not found"))
    assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Done("claim is gone")
    api = FakeApi()
    api.fail(DeleteClaim, Failed(409, "Precondition failed: UID in precondition: C, UID in object meta: C2"))
    assert isinstance(run_claim_sync(cache, api, "my-pod-gpu-abcde"), Retry)


def test_generated_claim_of_running_pod_is_kept() -> None:
    claim = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu")
    api = FakeApi()
    assert run_claim_sync(
        cache_with(pods=[generated_pod()], claims=[claim]), api, "my-pod-gpu-abcde"
    ) == Done("owning pod may still run")
    assert api.actions == []


def test_a_duplicate_of_the_claim_the_pod_records_is_deleted() -> None:
    """Two controllers raced (a hand-over): the pod's status names my-pod-gpu-abcde, and a
    second claim was generated for the same entry. It is never used; it goes."""
    recorded = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu")
    duplicate = make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(pods=[generated_pod()], claims=[recorded, duplicate])
    api = FakeApi()
    assert run_claim_sync(cache, api, "my-pod-gpu-zzzzz") == Done("deleted duplicate generated claim")
    assert api.writes() == [DeleteClaim("demo", "my-pod-gpu-zzzzz", "D")]
    api = FakeApi()
    assert run_claim_sync(cache, api, "my-pod-gpu-abcde") == Done("owning pod may still run")
    assert api.actions == []


def test_a_duplicate_is_kept_while_the_pod_records_none_or_it_is_in_use() -> None:
    duplicate = make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu")
    unrecorded = make_pod("my-pod", "U", claims=[template_entry("gpu", "gpu-tmpl")], node_name="node-1")
    api = FakeApi()
    assert run_claim_sync(cache_with(pods=[unrecorded], claims=[duplicate]), api, "my-pod-gpu-zzzzz") == Done(
        "owning pod may still run"
    )
    for in_use in (
        make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu", allocated=True),
        make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu", deleting=True),
    ):
        api = FakeApi()
        run_claim_sync(cache_with(pods=[generated_pod()], claims=[in_use]), api, "my-pod-gpu-zzzzz")
        assert api.actions == []


def test_a_claim_made_because_the_recorded_one_lost_its_owner_is_kept() -> None:
    """Scenario 12: the status names a claim that is no longer the pod's; the pod sync made a new
    one and is about to point the status at it. That one is not a duplicate."""
    orphan = make_claim("my-pod-gpu-abcde", "C", entry="gpu")
    replacement = make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(pods=[generated_pod()], claims=[orphan, replacement])
    api = FakeApi()
    assert run_claim_sync(cache, api, "my-pod-gpu-zzzzz") == Done("owning pod may still run")
    assert api.actions == []


def test_the_pod_event_routes_a_duplicate_it_makes_visible() -> None:
    """The duplicate may be seen before the status names the other claim: the pod's next event
    routes it to the claim sync."""
    recorded = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu")
    duplicate = make_claim("my-pod-gpu-zzzzz", "D", owner=("my-pod", "U"), entry="gpu")
    unrecorded = make_pod("my-pod", "U", claims=[template_entry("gpu", "gpu-tmpl")], node_name="node-1")
    cache = cache_with(pods=[unrecorded], claims=[recorded, duplicate])
    keys = cache.apply_pod_event("MODIFIED", generated_pod())
    assert Key(CLAIM, "demo", "my-pod-gpu-zzzzz") in keys
    assert Key(CLAIM, "demo", "my-pod-gpu-zzzzz") not in cache.apply_pod_event("MODIFIED", unrecorded)


def test_generated_claim_of_unknown_pod_is_left_to_the_garbage_collector() -> None:
    claim = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu")
    api = FakeApi()
    run_claim_sync(cache_with(claims=[claim]), api, "my-pod-gpu-abcde")
    assert api.actions == []


def test_pod_group_owned_claim_is_never_deleted() -> None:
    claim = make_claim("group-claim", owner_ref=pod_group_owner("g", "G"))
    api = FakeApi()
    run_claim_sync(cache_with(pods=[generated_pod(phase="Succeeded")], claims=[claim]), api, "group-claim")
    assert api.actions == []


def test_claim_already_being_deleted_is_not_deleted_again() -> None:
    claim = make_claim("my-pod-gpu-abcde", "C", owner=("my-pod", "U"), entry="gpu", deleting=True)
    api = FakeApi()
    run_claim_sync(
        cache_with(pods=[generated_pod(phase="Succeeded")], claims=[claim]), api, "my-pod-gpu-abcde"
    )
    assert api.actions == []


def test_scenario_30_restart_catch_up() -> None:
    # While the operator was down: pod "done" completed, and pod "gone" was removed while
    # reserved on a claim that is being deleted.
    done = generated_pod("Succeeded", name="done", uid="D")
    done_claim = generated_claim(("done", "D"), "DC")
    deleting_claim = make_claim(
        "shared",
        "S",
        allocated=True,
        finalizers=[FINALIZER],
        deleting=True,
        reserved_for=[pod_consumer("gone", "G")],
    )
    cache = ClusterCache()
    keys = cache.apply_claim_event(None, done_claim) + cache.apply_claim_event(None, deleting_claim)
    keys += cache.apply_pod_event(None, done)
    assert set(keys) == {Key(CLAIM, "demo", "done-gpu-abcde"), Key(CLAIM, "demo", "shared")}

    api = FakeApi()
    run_claim_sync(cache, api, "done-gpu-abcde")
    assert_released_and_deleted(api, "done-gpu-abcde", "DC")

    api = FakeApi()
    run_claim_sync(cache, api, "shared")
    assert api.of_type(GetPod) == [GetPod("demo", "gone")]
    assert_released_and_unfinalized(api)


CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/demo/resourceclaims/shared"


def test_release_plans_the_status_put_and_unprotect_the_finalizer_put_from_its_answer() -> None:
    claim = make_claim(
        "shared", allocated=True, finalizers=[FINALIZER], reserved_for=[pod_consumer("gone", "X")]
    )
    cache = cache_with(claims=[claim])
    remaining = remaining_consumers(cache, claim, {"X": None})
    assert remaining == []
    [status_put] = release(claim, remaining).steps
    assert isinstance(status_put, Replace)
    assert status_put.path == CLAIM_PATH + "/status"
    assert status_put.body["status"] == {"reservedFor": []}
    returned = {**status_put.body, "metadata": {**status_put.body["metadata"], "resourceVersion": "9"}}
    [finalizer_put] = unprotect(claim, remaining, returned).steps
    assert isinstance(finalizer_put, Replace)
    assert finalizer_put.path == CLAIM_PATH
    assert finalizer_put.body["metadata"]["finalizers"] == []
    assert finalizer_put.body["metadata"]["resourceVersion"] == "9"
    # Still allocated in the answer (a driver allocated meanwhile): the finalizer stays.
    assert unprotect(claim, remaining, {**returned, "status": {"allocation": {}}}) == Plan()


def test_a_consumer_the_live_read_finds_under_its_uid_stays() -> None:
    claim = make_claim("shared", reserved_for=[pod_consumer("newer", "N")])
    cache = cache_with(claims=[claim])
    assert remaining_consumers(cache, claim, {"N": "N"}) == [pod_consumer("newer", "N")]
    assert remaining_consumers(cache, claim, {"N": "other"}) == []
    assert release(claim, [pod_consumer("newer", "N")]) == Plan()


def test_every_failed_claim_write_ends_the_sync_404_as_done() -> None:
    claim = make_claim("shared", allocated=True, reserved_for=[pod_consumer("gone", "X")])
    [put] = release(claim, []).steps
    assert isinstance(put, Replace)
    assert put.tolerate == frozenset()
    assert callable(put.ends)
    assert put.ends(ApiError(404, "NotFound", "gone")) == Done("claim is gone")
    assert put.ends(ApiError(409, "Conflict", "changed", retry_after=2)) == Retry(
        "update status of claim demo/shared: changed", 2
    )


def test_the_delete_of_an_unused_generated_claim_carries_its_uid_and_a_log_line() -> None:
    cache = cache_with(pods=[generated_pod(phase="Succeeded")], claims=[generated_claim()])
    claim = cache.claim("demo", "my-pod-gpu-abcde")
    assert claim is not None
    plan, done = delete_unused(cache, claim)
    [delete] = plan.steps
    assert isinstance(delete, Delete)
    assert (delete.uid, delete.tolerate) == ("C", frozenset())
    assert plan.result == Done("deleted unused generated claim")
    assert done == (logging.INFO, "Deleted unused generated claim claim=demo/my-pod-gpu-abcde")
