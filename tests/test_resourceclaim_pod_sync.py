"""The ``pod:`` sync (spec section 7): its passes and the acceptance scenarios it decides."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from resourceclaim_builders import (
    TEMPLATE_SPEC,
    ApplyPodStatus,
    CountClaimCreate,
    CreateClaim,
    EmitEvent,
    Failed,
    FakeApi,
    FakeClock,
    GetClaim,
    Ok,
    PutClaimStatus,
    cache_with,
    claim_body,
    make_claim,
    make_pod,
    make_template,
    named_entry,
    pod_consumer,
    pod_group_owner,
    template_entry,
)

from operators.core.client import ApiError
from operators.core.keys import CLAIM, POD, Key
from operators.core.plan import Apply, Create, Plan, RecordEvent
from operators.core.reconcile import Done, GiveUp, Retry
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.creation import DECIDE_AGAIN
from operators.resourceclaim.models import Pod, ResourceClaim
from operators.resourceclaim.pod_sync import confirm_created_claims, decide_pod, sync_pod

GPU = [template_entry("gpu", "gpu-tmpl")]


GENERATED_GPU_STATUS = [{"name": "gpu", "resourceClaimName": "my-pod-gpu-bcdfg"}]
"""The pod's claim statuses once its claim from the template has been generated."""


def gpu_pod_and_template() -> ClusterCache:
    """The cache with the pod my-pod, whose one claim comes from the template gpu-tmpl, and that template."""
    return cache_with(pods=[make_pod(claims=GPU)], templates=[make_template()])


def sync_with_failing_status_apply(failure: Failed) -> tuple[ClusterCache, FakeApi, Any]:
    """The sync of ``gpu_pod_and_template()`` whose pod status apply fails once with ``failure``."""
    cache = gpu_pod_and_template()
    api = FakeApi()
    api.fail(ApplyPodStatus, failure)
    return cache, api, run_pod_sync(cache, api)


def applied_statuses(api: FakeApi) -> list[dict[str, str]]:
    """The claim statuses of the one pod status apply ``api`` received."""
    [apply] = api.of_type(ApplyPodStatus)
    return status_entries(apply)


def run_pod_sync(cache: ClusterCache, api: FakeApi, name: str = "my-pod") -> Any:
    return api.run(sync_pod(cache, "demo", name, api))


def status_entries(action: ApplyPodStatus) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = action.body["status"]["resourceClaimStatuses"]
    return entries


def watch_created_claims(cache: ClusterCache, api: FakeApi) -> None:
    for body in api.created:
        cache.apply_claim_event("ADDED", ResourceClaim.from_body(body))


def with_statuses(pod: Pod, action: ApplyPodStatus) -> Pod:
    """The pod as the watch delivers it after our status apply."""
    body = pod.model_dump(by_alias=True, exclude_none=True)
    body["status"]["resourceClaimStatuses"] = status_entries(action)
    return Pod.model_validate(body)


# Step 1: pods that get nothing.


def test_absent_deleted_and_terminal_pods_get_nothing() -> None:
    templates = [make_template()]
    for pod in (
        make_pod(claims=GPU, deleting=True, node_name="node-1"),
        make_pod(claims=GPU, phase="Succeeded"),
        make_pod(claims=GPU, phase="Failed"),
    ):
        api = FakeApi()
        assert isinstance(run_pod_sync(cache_with(pods=[pod], templates=templates), api), Done)
        assert api.actions == []
    api = FakeApi()
    assert run_pod_sync(cache_with(templates=templates), api) == Done("pod is gone")
    assert api.actions == []


# Scenario 1.


def test_scenario_1_create() -> None:
    cache = gpu_pod_and_template()
    api = FakeApi()
    outcome = run_pod_sync(cache, api)

    assert outcome == Done("kube-scheduler makes the reservations")
    [create] = api.of_type(CreateClaim)
    assert create == CreateClaim(
        "demo",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": "my-pod-gpu-",
                "namespace": "demo",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": "U", "controller": True}
                ],
                "annotations": {"note": "x", "resource.kubernetes.io/pod-claim-name": "gpu"},
                "labels": {"app": "demo"},
            },
            "spec": TEMPLATE_SPEC,
        },
    )
    assert api.of_type(CountClaimCreate) == [CountClaimCreate("success", "false")]
    assert api.of_type(ApplyPodStatus) == [
        ApplyPodStatus(
            "demo",
            "my-pod",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "my-pod", "namespace": "demo", "uid": "U"},
                "status": {
                    "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "my-pod-gpu-bcdfg"}]
                },
            },
        )
    ]
    assert api.of_type(EmitEvent) == []


def test_generated_claim_has_no_labels_key_without_template_labels() -> None:
    cache = cache_with(pods=[make_pod(claims=GPU)], templates=[make_template(labels={})])
    api = FakeApi()
    run_pod_sync(cache, api)
    [create] = api.of_type(CreateClaim)
    assert "labels" not in create.body["metadata"]
    assert set(create.body) == {"apiVersion", "kind", "metadata", "spec"}


def test_generated_claim_spec_is_a_copy() -> None:
    template = make_template()
    cache = cache_with(pods=[make_pod(claims=GPU)], templates=[template])
    api = FakeApi()
    run_pod_sync(cache, api)
    [create] = api.of_type(CreateClaim)
    create.body["spec"]["devices"]["requests"].clear()
    assert template.spec.spec == TEMPLATE_SPEC


# Scenario 2.


def test_scenario_2_our_annotation_wins() -> None:
    template = make_template(annotations={"note": "x", "resource.kubernetes.io/pod-claim-name": "other"})
    cache = cache_with(pods=[make_pod(claims=GPU)], templates=[template])
    api = FakeApi()
    run_pod_sync(cache, api)
    [create] = api.of_type(CreateClaim)
    assert create.body["metadata"]["annotations"] == {
        "note": "x",
        "resource.kubernetes.io/pod-claim-name": "gpu",
    }


# Scenario 3.


def test_scenario_3_truncated_generate_names() -> None:
    cases = [
        ("a" * 60, "gpu", "a" * 52 + "-gp"),
        ("p" * 30, "c" * 30, "p" * 27 + "-" + "c" * 27),
        ("x" * 50, "y" * 5, "x" * 50 + "-" + "y" * 5 + "-"),
        ("x" * 50, "y" * 6, "x" * 49 + "-" + "y" * 5),
    ]
    for pod_name, entry_name, expected in cases:
        pod = make_pod(pod_name, claims=[template_entry(entry_name, "gpu-tmpl")])
        api = FakeApi()
        run_pod_sync(cache_with(pods=[pod], templates=[make_template()]), api, pod_name)
        [create] = api.of_type(CreateClaim)
        assert create.body["metadata"]["generateName"] == expected
        assert api.created[0]["metadata"]["name"] == expected + "bcdfg"


# Scenario 4.


def test_scenario_4_two_claims_sorted_and_stable() -> None:
    entries = [template_entry("nic", "gpu-tmpl"), template_entry("gpu", "gpu-tmpl")]
    pod = make_pod(claims=entries)
    cache = cache_with(pods=[pod], templates=[make_template()])
    api = FakeApi()
    run_pod_sync(cache, api)
    [apply] = api.of_type(ApplyPodStatus)
    assert status_entries(apply) == [
        {"name": "gpu", "resourceClaimName": "my-pod-gpu-hjklm"},
        {"name": "nic", "resourceClaimName": "my-pod-nic-bcdfg"},
    ]

    # The watch catches up: nothing more to do, so the status is never written again.
    watch_created_claims(cache, api)
    pod = with_statuses(pod, apply)
    assert cache.apply_pod_event("MODIFIED", pod) == []
    again = FakeApi()
    assert isinstance(run_pod_sync(cache, again), Done)
    assert again.actions == []

    # The nic claim is deleted by hand: it is re-created, and gpu's entry is kept.
    nic = cache.claim("demo", "my-pod-nic-bcdfg")
    assert nic is not None
    assert cache.apply_claim_event("DELETED", nic) == [Key(POD, "demo", "my-pod")]
    recreate = FakeApi()
    recreate.created = [{}, {}]  # continue the random-suffix sequence of the first run
    run_pod_sync(cache, recreate)
    assert [create.body["metadata"]["generateName"] for create in recreate.of_type(CreateClaim)] == [
        "my-pod-nic-"
    ]
    [apply] = recreate.of_type(ApplyPodStatus)
    assert status_entries(apply) == [
        {"name": "gpu", "resourceClaimName": "my-pod-gpu-hjklm"},
        {"name": "nic", "resourceClaimName": "my-pod-nic-npqrs"},
    ]


def test_status_list_keeps_existing_named_entries_and_drops_unnamed_ones() -> None:
    pod = make_pod(
        claims=[template_entry("b", "gpu-tmpl"), template_entry("a", "gpu-tmpl")],
        statuses=[{"name": "z-gone", "resourceClaimName": "kept"}, {"name": "a"}],
    )
    api = FakeApi()
    run_pod_sync(cache_with(pods=[pod], templates=[make_template()]), api)
    [apply] = api.of_type(ApplyPodStatus)
    assert status_entries(apply) == [
        {"name": "b", "resourceClaimName": "my-pod-b-bcdfg"},
        {"name": "z-gone", "resourceClaimName": "kept"},
    ]


# Scenario 5 and 29.


def test_scenario_5_missing_template() -> None:
    pod = make_pod(claims=[template_entry("gpu", "missing")])
    cache = cache_with(pods=[pod])
    api = FakeApi()
    outcome = run_pod_sync(cache, api)

    assert api.of_type(CreateClaim) == []
    assert api.of_type(ApplyPodStatus) == []
    assert api.of_type(EmitEvent) == [
        EmitEvent(
            namespace="demo",
            name="my-pod",
            uid="U",
            type="Warning",
            reason="FailedResourceClaimCreation",
            message='PodResourceClaim gpu: resource claim template "missing": '
            'resourceclaimtemplate.resource.k8s.io "missing" not found',
        )
    ]
    assert isinstance(outcome, Retry)

    # Scenario 29: the template appears; its event enqueues the pod and the sync creates.
    assert cache.apply_template_event("ADDED", make_template("missing")) == [Key(POD, "demo", "my-pod")]
    later = FakeApi()
    assert isinstance(run_pod_sync(cache, later), Done)
    assert len(later.of_type(CreateClaim)) == 1
    assert len(later.of_type(ApplyPodStatus)) == 1


# Scenarios 6 and 7.


def test_scenario_6_admin_access_rejected() -> None:
    message = (
        'resourceclaims.resource.k8s.io "my-pod-gpu-" is forbidden: admin access to devices requires the '
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    )
    spec = {
        "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "c", "adminAccess": True}}]}
    }
    cache = cache_with(pods=[make_pod(claims=GPU)], templates=[make_template(spec=spec)])
    api = FakeApi()
    api.fail(CreateClaim, Failed(403, message))
    outcome = run_pod_sync(cache, api)

    assert api.of_type(CountClaimCreate) == [CountClaimCreate("failure", "true")]
    [event] = api.of_type(EmitEvent)
    assert event.message == f"PodResourceClaim gpu: create ResourceClaim : {message}"
    assert outcome == Retry(f"pod demo/my-pod, PodResourceClaim gpu: create ResourceClaim : {message}")
    assert api.of_type(ApplyPodStatus) == []

    # The namespace gets its label: the next retry creates the claim.
    retry = FakeApi()
    run_pod_sync(cache, retry)
    assert retry.of_type(CountClaimCreate) == [CountClaimCreate("success", "true")]


def test_scenario_7_quota_message_is_passed_verbatim() -> None:
    message = (
        'resourceclaims.resource.k8s.io "my-pod-gpu-" is forbidden: exceeded quota: q, '
        "requested: count/resourceclaims.resource.k8s.io=1, used: count/resourceclaims.resource.k8s.io=0, "
        "limited: count/resourceclaims.resource.k8s.io=0"
    )
    cache = gpu_pod_and_template()
    api = FakeApi()
    api.fail(CreateClaim, Failed(403, message))
    run_pod_sync(cache, api)
    [event] = api.of_type(EmitEvent)
    assert event.message == "PodResourceClaim gpu: create ResourceClaim : " + message


def test_create_throttled_keeps_retry_after() -> None:
    cache = gpu_pod_and_template()
    api = FakeApi()
    api.fail(CreateClaim, Failed(429, "Too many requests", retry_after=3.0))
    outcome = run_pod_sync(cache, api)
    assert isinstance(outcome, Retry)
    assert outcome.after == 3.0


# Scenario 8.


def test_scenario_8_user_claim_by_name() -> None:
    pod = make_pod(claims=[named_entry("gpu", "shared")])
    cache = cache_with(pods=[pod])
    api = FakeApi()
    assert isinstance(run_pod_sync(cache, api), Done)
    assert api.actions == []

    assert cache.apply_claim_event("ADDED", make_claim("shared")) == [Key(CLAIM, "demo", "shared")]
    api = FakeApi()
    run_pod_sync(cache, api)
    assert api.actions == []


# Scenarios 9, 10 and 11: never a second claim.


def test_scenario_9_status_write_fails_once_and_the_watch_catches_up() -> None:
    cache, api, outcome = sync_with_failing_status_apply(Failed(500, "internal error"))
    assert outcome == Retry("update pod demo/my-pod ResourceClaimStatuses: internal error")
    assert api.of_type(EmitEvent) == []

    watch_created_claims(cache, api)
    retry = FakeApi()
    assert isinstance(run_pod_sync(cache, retry), Done)
    assert retry.of_type(CreateClaim) == []
    assert applied_statuses(retry) == GENERATED_GPU_STATUS


def test_scenario_10_retry_before_the_watch_catches_up() -> None:
    cache, api, outcome = sync_with_failing_status_apply(Failed(500, "internal error"))
    assert isinstance(outcome, Retry)
    [first_apply] = api.of_type(ApplyPodStatus)

    # No claim watch event in between: the just-created record alone prevents a second POST.
    retry = FakeApi()
    assert isinstance(run_pod_sync(cache, retry), Done)
    assert retry.of_type(CreateClaim) == []
    assert retry.of_type(ApplyPodStatus) == [first_apply]


def test_scenario_11_restart_reuses_the_claim_from_the_listing() -> None:
    # Killed after the create, before the status write: the new process lists the claim.
    claim = make_claim("my-pod-gpu-bcdfg", "C1", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(pods=[make_pod(claims=GPU)], claims=[claim], templates=[make_template()])
    api = FakeApi()
    run_pod_sync(cache, api)
    assert api.of_type(CreateClaim) == []
    assert applied_statuses(api) == GENERATED_GPU_STATUS


@pytest.mark.parametrize(
    ("failure", "ending"),
    [
        pytest.param(Failed(404, 'pods "my-pod" not found'), Done, id="pod-gone-ends"),
        pytest.param(
            Failed(409, "Precondition failed: UID in precondition: U, UID in object meta: U2"),
            Retry,
            id="replaced-pod-retried",
        ),
    ],
)
def test_a_refused_status_apply(failure: Failed, ending: type[Done | Retry]) -> None:
    assert isinstance(sync_with_failing_status_apply(failure)[2], ending)


# Scenario 12.


def test_scenario_12_claim_no_longer_owned(caplog: pytest.LogCaptureFixture) -> None:
    pod = make_pod(claims=GPU, statuses=[{"name": "gpu", "resourceClaimName": "x"}])
    orphan = make_claim("x", entry="gpu")
    cache = cache_with(pods=[pod], claims=[orphan], templates=[make_template()])
    api = FakeApi()
    with caplog.at_level(logging.INFO, "operators.resourceclaim"):
        run_pod_sync(cache, api)
    [line] = [record.getMessage() for record in caplog.records if "no longer owned" in record.getMessage()]
    assert line == (
        "Claim that was created for the pod is no longer owned by the pod, creating a new one "
        "pod=demo/my-pod podClaim=gpu resourceClaim=x"
    )
    assert len(api.of_type(CreateClaim)) == 1
    assert applied_statuses(api) == GENERATED_GPU_STATUS
    assert not [write for write in api.writes() if getattr(write, "name", None) == "x"]


# Scenarios 13-15: pre-scheduled pods.


def test_scenario_13_prescheduled_pod_reserves_allocated_claim() -> None:
    pod = make_pod("p", "U", claims=[named_entry("gpu", "shared")], node_name="node-1")
    shared = make_claim("shared", allocated=True)
    cache = cache_with(pods=[pod], claims=[shared])
    api = FakeApi()
    assert run_pod_sync(cache, api, "p") == Done()
    [put] = api.writes()
    assert isinstance(put, PutClaimStatus)
    assert (put.namespace, put.name) == ("demo", "shared")
    assert put.body["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "U"}]
    assert put.body["metadata"]["resourceVersion"] == "42"
    assert put.body["status"]["allocation"] == shared.body["status"]["allocation"]
    assert "managedFields" not in put.body["metadata"]
    assert shared.body["status"].get("reservedFor") is None


@pytest.mark.parametrize(
    ("phase", "shared", "ending"),
    [
        pytest.param("Pending", make_claim("shared"), Done(), id="scenario-14-unallocated"),
        pytest.param(
            "Succeeded",
            make_claim("shared", allocated=True, reserved_for=[pod_consumer("q", "Q")]),
            Done("pod has terminated"),
            id="scenario-15-terminal-prescheduled",
        ),
        pytest.param(
            "Pending",
            make_claim("shared", allocated=True, reserved_for=[pod_consumer("p", "U")]),
            Done(),
            id="already-reserved",
        ),
    ],
)
def test_a_claim_the_pod_need_not_reserve_is_left_alone(
    phase: str, shared: ResourceClaim, ending: Done
) -> None:
    pod = make_pod("p", "U", claims=[named_entry("gpu", "shared")], node_name="node-1", phase=phase)
    api = FakeApi()
    assert run_pod_sync(cache_with(pods=[pod], claims=[shared]), api, "p") == ending
    assert api.actions == []


def test_reservation_waits_for_missing_claim() -> None:
    pod = make_pod("p", "U", claims=[named_entry("gpu", "shared")], node_name="node-1")
    api = FakeApi()
    assert run_pod_sync(cache_with(pods=[pod]), api, "p") == Done(
        "claim shared does not exist yet; kubelet waits for it"
    )


def test_reservation_conflict_is_retried() -> None:
    pod = make_pod("p", "U", claims=[named_entry("gpu", "shared")], node_name="node-1")
    api = FakeApi()
    api.fail(PutClaimStatus, Failed(409, "the object has been modified"))
    outcome = run_pod_sync(cache_with(pods=[pod], claims=[make_claim("shared", allocated=True)]), api, "p")
    assert outcome == Retry("reserve claim demo/shared: the object has been modified")


def test_prescheduled_pod_with_template_retries_until_the_cache_has_its_status() -> None:
    pod = make_pod("p", "U", claims=GPU, node_name="node-1")
    cache = cache_with(pods=[pod], templates=[make_template()])
    api = FakeApi()
    assert run_pod_sync(cache, api, "p") == Retry('pod "demo/p": ResourceClaim not created yet')
    [apply] = api.of_type(ApplyPodStatus)

    created = ResourceClaim.from_body({**api.created[0], "status": {"allocation": {"devices": {}}}})
    cache.apply_claim_event("ADDED", created)
    cache.apply_pod_event("MODIFIED", with_statuses(pod, apply))
    retry = FakeApi()
    assert run_pod_sync(cache, retry, "p") == Done()
    [put] = retry.writes()
    assert isinstance(put, PutClaimStatus)
    assert put.body["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "U"}]


def test_prescheduled_pod_with_foreign_recorded_claim_is_retried_without_event() -> None:
    # A recorded template claim that lost its owner; the pod sync re-creates it in 7.1, but
    # the cached status still names the old one, so 7.5 refuses to reserve it.
    pod = make_pod(
        "p",
        "U",
        claims=GPU,
        node_name="node-1",
        statuses=[{"name": "gpu", "resourceClaimName": "x"}],
    )
    cache = cache_with(
        pods=[pod], claims=[make_claim("x", entry="gpu", allocated=True)], templates=[make_template()]
    )
    api = FakeApi()
    outcome = run_pod_sync(cache, api, "p")
    assert outcome == Retry("ResourceClaim demo/x was not created for Pod demo/p (Pod is not owner)")
    assert api.of_type(EmitEvent) == []


# Scenario 31: input that cannot change by itself.


def test_scenario_31_unsupported_entry() -> None:
    pod = make_pod(claims=[{"name": "gpu"}])
    api = FakeApi()
    outcome = run_pod_sync(cache_with(pods=[pod], templates=[make_template()]), api)
    text = (
        'checking for claim before creating it: pod "demo/my-pod", spec.resourceClaim "gpu": '
        "none of the supported fields are set"
    )
    assert api.of_type(EmitEvent) == [
        EmitEvent(
            "demo", "my-pod", "U", "Warning", "FailedResourceClaimCreation", f"PodResourceClaim gpu: {text}"
        )
    ]
    assert outcome == GiveUp(f"pod demo/my-pod, PodResourceClaim gpu: {text}")
    assert api.writes() == []


def test_scenario_31_pod_group_owned_claim() -> None:
    pod = make_pod(claims=GPU, statuses=[{"name": "gpu", "resourceClaimName": "group-claim"}])
    claim = make_claim("group-claim", owner_ref=pod_group_owner("training", "G"), entry="gpu")
    api = FakeApi()
    outcome = run_pod_sync(cache_with(pods=[pod], claims=[claim], templates=[make_template()]), api)
    text = (
        "ResourceClaim demo/group-claim is controlled by PodGroup training, "
        "PodGroup ResourceClaims are not supported"
    )
    [event] = api.of_type(EmitEvent)
    assert event.message == f"PodResourceClaim gpu: {text}"
    assert event.reason == "FailedResourceClaimCreation"
    assert isinstance(outcome, GiveUp)
    assert api.writes() == []


def test_first_failing_entry_stops_the_sync_without_status_write() -> None:
    entries = [template_entry("gpu", "gpu-tmpl"), template_entry("nic", "missing")]
    api = FakeApi()
    run_pod_sync(cache_with(pods=[make_pod(claims=entries)], templates=[make_template()]), api)
    assert len(api.of_type(CreateClaim)) == 1
    assert api.of_type(ApplyPodStatus) == []
    [event] = api.of_type(EmitEvent)
    assert event.message.startswith("PodResourceClaim nic: ")


# 7.3: the just-created confirmation.


def test_confirmation_keeps_existing_and_drops_missing_claims() -> None:
    clock = FakeClock()
    cache = ClusterCache(clock=clock)
    for name, uid in (("kept", "K"), ("gone", "G"), ("flaky", "F")):
        cache.record_created(make_claim(name, uid, owner=("my-pod", "U"), entry=name))
    clock.now += 60
    api = FakeApi()
    api.fail(
        GetClaim,
        Ok({"metadata": {"name": "kept", "uid": "K"}}),
        Failed(404, 'resourceclaims.resource.k8s.io "gone" not found'),
        Failed(0, "connection refused"),
    )
    assert api.run(confirm_created_claims(cache, api.client)) == Done()
    assert api.of_type(GetClaim) == [
        GetClaim("demo", "kept"),
        GetClaim("demo", "gone"),
        GetClaim("demo", "flaky"),
    ]
    # The failed GET changes nothing: the claim is checked again next round.
    assert [claim.name for claim in cache.unconfirmed_created_claims()] == ["flaky"]
    assert cache.find_generated_claim("demo", "U", "kept") is not None
    assert cache.find_generated_claim("demo", "U", "gone") is None


# The passes of the pod sync, as plans.


def test_a_pass_that_needs_a_claim_plans_its_create_alone_and_decides_again() -> None:
    cache = gpu_pod_and_template()
    plan = decide_pod(cache, "demo", "my-pod", {})
    [create] = plan.steps
    assert isinstance(create, Create)
    assert create.path == "/apis/resource.k8s.io/v1/namespaces/demo/resourceclaims"
    assert create.field_manager
    assert create.tolerate == frozenset()
    assert create.body["metadata"]["generateName"] == "my-pod-gpu-"
    assert plan.result is DECIDE_AGAIN
    assert callable(create.ends)
    assert create.ends(ApiError(409, "AlreadyExists", "")) is DECIDE_AGAIN


def test_once_the_claim_is_recorded_the_next_pass_applies_the_status() -> None:
    cache = gpu_pod_and_template()
    cache.record_created(make_claim("my-pod-gpu-bcdfg", "N", owner=("my-pod", "U"), entry="gpu"))
    [apply] = decide_pod(cache, "demo", "my-pod", {}).steps
    assert isinstance(apply, Apply)
    assert apply.path == "/api/v1/namespaces/demo/pods/my-pod/status"
    assert apply.body["status"]["resourceClaimStatuses"] == GENERATED_GPU_STATUS
    assert callable(apply.ends)
    assert apply.ends(ApiError(404, "NotFound", "")) == Done(
        "pod is gone; the garbage collector takes its claims"
    )


def test_a_status_naming_a_claim_the_watch_has_not_delivered_yet_needs_no_write() -> None:
    pod = make_pod(claims=GPU, statuses=GENERATED_GPU_STATUS)
    cache = cache_with(pods=[pod], templates=[make_template()])
    cache.record_created(make_claim("my-pod-gpu-bcdfg", "N", owner=("my-pod", "U"), entry="gpu"))
    assert decide_pod(cache, "demo", "my-pod", {}) == Plan(
        result=Done("kube-scheduler makes the reservations")
    )
    assert cache.apply_pod_event("MODIFIED", pod) == [], "the pod's own events need no sync"


def test_a_refused_create_is_reported_on_its_entry_by_the_next_pass() -> None:
    cache = gpu_pod_and_template()
    refused = {"gpu": ApiError(403, "Forbidden", "quota exceeded", retry_after=3)}
    plan = decide_pod(cache, "demo", "my-pod", refused)
    [event] = plan.steps
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason) == ("Warning", "FailedResourceClaimCreation")
    assert event.message == "PodResourceClaim gpu: create ResourceClaim : quota exceeded"
    assert plan.result == Retry(
        "pod demo/my-pod, PodResourceClaim gpu: create ResourceClaim : quota exceeded", 3
    )


# A recorded claim the claim cache does not hold yet (upstream's claimExists).


def pod_naming_an_unseen_claim() -> ClusterCache:
    """The pod's status names its generated claim, which the claim watch has not delivered: another
    process created it (a leader hand-over), and the pod watch was faster than the claim watch."""
    pod = make_pod(claims=GPU, statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-zzzzz"}])
    return cache_with(pods=[pod], templates=[make_template()])


def test_a_recorded_claim_missing_from_the_cache_is_looked_up_before_it_is_re_created() -> None:
    api = FakeApi()
    api.fail(GetClaim, Ok(claim_body("my-pod-gpu-zzzzz", "C1", owner=("my-pod", "U"), entry="gpu")))
    outcome = run_pod_sync(pod_naming_an_unseen_claim(), api)
    assert api.actions == [GetClaim("demo", "my-pod-gpu-zzzzz")]
    assert outcome == Done("kube-scheduler makes the reservations")


def test_a_recorded_claim_gone_or_no_longer_owned_on_the_live_read_is_re_created() -> None:
    for reply in (
        Failed(404, 'resourceclaims.resource.k8s.io "my-pod-gpu-zzzzz" not found'),
        Ok(claim_body("my-pod-gpu-zzzzz", "C1", entry="gpu")),
    ):
        api = FakeApi()
        api.fail(GetClaim, reply)
        run_pod_sync(pod_naming_an_unseen_claim(), api)
        assert len(api.of_type(CreateClaim)) == 1
        assert applied_statuses(api) == GENERATED_GPU_STATUS


def test_a_failed_live_read_of_a_recorded_claim_is_reported_and_retried() -> None:
    api = FakeApi()
    api.fail(GetClaim, Failed(503, "the server is currently unable to handle the request", 2))
    outcome = run_pod_sync(pod_naming_an_unseen_claim(), api)
    message = "checking claim existence: the server is currently unable to handle the request"
    assert api.of_type(CreateClaim) == []
    assert api.of_type(EmitEvent) == [
        EmitEvent(
            "demo",
            "my-pod",
            "U",
            "Warning",
            "FailedResourceClaimCreation",
            f"PodResourceClaim gpu: {message}",
        )
    ]
    assert outcome == Retry(f"pod demo/my-pod, PodResourceClaim gpu: {message}", 2)


def test_a_claim_the_cache_holds_needs_no_live_read() -> None:
    claim = make_claim("my-pod-gpu-bcdfg", "C1", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(
        pods=[make_pod(claims=GPU, statuses=GENERATED_GPU_STATUS)],
        claims=[claim],
        templates=[make_template()],
    )
    api = FakeApi()
    run_pod_sync(cache, api)
    assert api.actions == []
