"""PodGroup ResourceClaims (KEP-5729) in the resourceclaim operator: routing, the ``podgroup:``
sync, member pods and the release of group reservations, as upstream 1.37.2 decides them."""

from __future__ import annotations

from typing import Any

import pytest
from resourceclaim_builders import (
    ApplyPodGroupStatus,
    ApplyPodStatus,
    CountClaimCreate,
    CreateClaim,
    DeleteClaim,
    EmitEvent,
    Failed,
    FakeApi,
    GetClaim,
    GetPodGroup,
    Ok,
    PutClaim,
    PutClaimStatus,
    cache_with,
    claim_body,
    make_claim,
    make_pod,
    make_pod_group,
    make_template,
    named_entry,
    pod_consumer,
    pod_group_body,
    pod_group_consumer,
    pod_group_owner,
    template_entry,
)

from operators.core.keys import CLAIM, POD, Key
from operators.core.plan import Apply, Create, Plan
from operators.core.reconcile import Done, GiveUp, Retry
from operators.dra.podgroups import POD_GROUPS, PodGroup
from operators.resourceclaim.bodies import owner_labels
from operators.resourceclaim.cache import DELETED, ClusterCache
from operators.resourceclaim.claim_sync import sync_claim
from operators.resourceclaim.creation import DECIDE_AGAIN
from operators.resourceclaim.group_sync import decide_pod_group, sync_pod_group
from operators.resourceclaim.models import Pod, ResourceClaim
from operators.resourceclaim.pod_sync import sync_pod
from operators.resourceclaim.resolution import POD_GROUP

pytestmark = pytest.mark.unit

GPU = template_entry("gpu", "gpu-tmpl")
NIC = template_entry("nic", "gpu-tmpl")
FINALIZER = "resource.kubernetes.io/delete-protection"


def member(name: str = "m1", uid: str = "M1", **kwargs: Any) -> Pod:
    kwargs.setdefault("claims", [GPU])
    return make_pod(name, uid, pod_group="pg", **kwargs)


def group_claim(name: str = "pg-gpu-abcde", **kwargs: Any) -> ResourceClaim:
    return make_claim(name, owner_ref=pod_group_owner(), entry="gpu", **kwargs)


def group_statuses(action: ApplyPodGroupStatus) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = action.body["status"]["resourceClaimStatuses"]
    return entries


def with_group_status(group: PodGroup, action: ApplyPodGroupStatus) -> PodGroup:
    """The group as the watch delivers it after our status apply."""
    body = group.model_dump(by_alias=True, exclude_none=True)
    body["status"] = {"resourceClaimStatuses": group_statuses(action)}
    return PodGroup.model_validate(body)


# -- keys and routing ----------------------------------------------------------------------------


def test_a_group_without_its_generated_claim_is_synced_and_its_members_routed() -> None:
    cache = cache_with(pods=[member()], templates=[make_template()], workload_claims=True)
    keys = cache.apply_pod_group_event(None, make_pod_group(claims=[GPU]))
    assert keys == [Key(POD_GROUP, "demo", "pg"), Key(POD, "demo", "m1")]


def test_a_member_waits_for_its_group_and_the_group_routes_it() -> None:
    cache = cache_with(workload_claims=True)
    assert cache.apply_pod_event(None, member()) == []
    # A group without claims routes its members too: they were waiting for it to exist.
    assert cache.apply_pod_group_event(None, make_pod_group()) == [Key(POD, "demo", "m1")]


def test_where_podgroup_claims_are_off_a_member_is_a_pod_like_any_other() -> None:
    cache = cache_with()
    assert cache.apply_pod_event(None, member()) == [Key(POD, "demo", "m1")]


def test_a_deleted_generated_claim_or_a_late_template_routes_the_group() -> None:
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = cache_with(claims=[group_claim()], pod_groups=[group], workload_claims=True)
    assert cache.apply_claim_event(DELETED, group_claim()) == [Key(POD_GROUP, "demo", "pg")]
    late = cache_with(pod_groups=[make_pod_group(claims=[GPU])], workload_claims=True)
    assert late.apply_template_event("ADDED", make_template()) == [Key(POD_GROUP, "demo", "pg")]


def test_a_removed_group_releases_its_claims_and_is_remembered() -> None:
    group = make_pod_group(
        claims=[GPU, named_entry("shared", "shared")], statuses=[named_entry("gpu", "pg-gpu-abcde")]
    )
    cache = cache_with(pod_groups=[group], workload_claims=True)
    keys = cache.apply_pod_group_event(DELETED, group)
    assert keys == [Key(CLAIM, "demo", "pg-gpu-abcde"), Key(CLAIM, "demo", "shared")]
    assert cache.is_deleted_consumer("G")
    assert cache.pod_group("demo", "pg") is None


def test_a_group_being_deleted_needs_no_sync_and_keeps_its_claims() -> None:
    cache = cache_with(workload_claims=True)
    assert cache.apply_pod_group_event(None, make_pod_group(claims=[GPU], deleting=True)) == []


# -- the podgroup: sync --------------------------------------------------------------------------


def test_template_entry_gets_one_claim_owned_by_the_group_and_recorded_in_its_status() -> None:
    group = make_pod_group(claims=[GPU])
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    [create] = api.of_type(CreateClaim)
    metadata = create.body["metadata"]
    assert metadata["generateName"] == "pg-gpu-"
    assert metadata["ownerReferences"] == [pod_group_owner()]
    assert metadata["annotations"] == {"note": "x", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert metadata["labels"] == {"app": "demo"}
    assert api.of_type(CountClaimCreate) == [
        CountClaimCreate("success", "false", "scheduling.k8s.io", "PodGroup")
    ]
    [apply] = api.of_type(ApplyPodGroupStatus)
    assert apply.body["metadata"] == {"name": "pg", "namespace": "demo", "uid": "G"}
    assert apply.body["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group_statuses(apply) == [{"name": "gpu", "resourceClaimName": "pg-gpu-bcdfg"}]
    assert api.of_type(EmitEvent) == []


def test_a_retry_before_the_watch_finds_the_created_claim_instead_of_another() -> None:
    group = make_pod_group(claims=[GPU])
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    api.fail(ApplyPodGroupStatus, Failed(500, "etcd timeout"))
    assert isinstance(api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)), Retry)
    retry = FakeApi()
    assert retry.run(sync_pod_group(cache, "demo", "pg", retry, POD_GROUPS)) == Done()
    assert retry.of_type(CreateClaim) == []
    [apply] = retry.of_type(ApplyPodGroupStatus)
    assert group_statuses(apply) == [{"name": "gpu", "resourceClaimName": "pg-gpu-bcdfg"}]


def test_a_recorded_claim_that_exists_needs_no_write() -> None:
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = cache_with(claims=[group_claim()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    assert api.writes() == []


def test_a_status_naming_a_claim_the_watch_has_not_delivered_yet_needs_no_write() -> None:
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-bcdfg")])
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    cache.record_created(group_claim("pg-gpu-bcdfg", uid="N"))
    assert decide_pod_group(cache, "demo", "pg", POD_GROUPS, {}) == Plan()
    assert cache.apply_pod_group_event("MODIFIED", group) == [], "the group's own events need no sync"


def test_a_recorded_claim_the_watch_has_not_delivered_is_read_before_it_is_re_created() -> None:
    """Another process created and recorded it; upstream's ``claimExists`` reads it too."""
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-zzzzz")])
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    api.fail(GetClaim, Ok(claim_body("pg-gpu-zzzzz", "C1", owner_ref=pod_group_owner(), entry="gpu")))
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    assert api.actions == [GetClaim("demo", "pg-gpu-zzzzz")]


def test_a_re_created_claim_keeps_the_other_entries_in_the_status() -> None:
    """Upstream 1.37.2 applies only the new entry, which drops the other one; ours merges."""
    group = make_pod_group(
        claims=[GPU, NIC],
        statuses=[named_entry("gpu", "pg-gpu-abcde"), named_entry("nic", "pg-nic-gone")],
    )
    cache = cache_with(
        templates=[make_template()], claims=[group_claim()], pod_groups=[group], workload_claims=True
    )
    api = FakeApi()
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    [create] = api.of_type(CreateClaim)
    assert create.body["metadata"]["generateName"] == "pg-nic-"
    [apply] = api.of_type(ApplyPodGroupStatus)
    assert group_statuses(apply) == [
        {"name": "gpu", "resourceClaimName": "pg-gpu-abcde"},
        {"name": "nic", "resourceClaimName": "pg-nic-bcdfg"},
    ]


def test_a_missing_template_is_an_event_on_the_group_and_no_status_write() -> None:
    group = make_pod_group(claims=[GPU, template_entry("late", "late-tmpl")])
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    result = api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS))
    assert isinstance(result, Retry)
    assert result.error == (
        'PodGroup demo/pg, PodGroupResourceClaim late: resource claim template "late-tmpl": '
        'resourceclaimtemplate.resource.k8s.io "late-tmpl" not found'
    )
    assert api.of_type(EmitEvent) == [
        EmitEvent(
            namespace="demo",
            name="pg",
            uid="G",
            type="Warning",
            reason="FailedResourceClaimCreation",
            message='PodGroupResourceClaim late: resource claim template "late-tmpl": '
            'resourceclaimtemplate.resource.k8s.io "late-tmpl" not found',
            api_version="scheduling.k8s.io/v1beta1",
            kind="PodGroup",
        )
    ]
    # The claim of the first entry exists; the retry finds it again.
    assert len(api.of_type(CreateClaim)) == 1
    assert api.of_type(ApplyPodGroupStatus) == []


def test_an_entry_without_a_supported_field_gives_up() -> None:
    group = make_pod_group(claims=[{"name": "odd"}])
    cache = cache_with(pod_groups=[group], workload_claims=True)
    api = FakeApi()
    result = api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS))
    assert isinstance(result, GiveUp)
    [event] = api.of_type(EmitEvent)
    assert event.message == (
        "PodGroupResourceClaim odd: checking for claim before creating it: "
        "PodGroup demo/pg, spec.resourceClaim odd: none of the supported fields are set"
    )


@pytest.mark.parametrize(
    "group",
    [
        make_pod_group(claims=[named_entry("gpu", "shared")]),
        make_pod_group(claims=[GPU], deleting=True),
    ],
    ids=["direct claim", "terminating group"],
)
def test_nothing_is_created_for_a_direct_claim_or_a_terminating_group(group: PodGroup) -> None:
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    assert isinstance(api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)), Done)
    assert api.actions == []


def test_a_failed_create_counts_with_the_group_owner_labels() -> None:
    cache = cache_with(
        templates=[make_template()], pod_groups=[make_pod_group(claims=[GPU])], workload_claims=True
    )
    api = FakeApi()
    api.fail(CreateClaim, Failed(403, "quota exceeded"))
    assert isinstance(api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)), Retry)
    assert api.of_type(CountClaimCreate) == [
        CountClaimCreate("failure", "false", "scheduling.k8s.io", "PodGroup")
    ]
    [event] = api.of_type(EmitEvent)
    assert event.message == "PodGroupResourceClaim gpu: create ResourceClaim : quota exceeded"


def test_owner_labels_of_the_create_counter() -> None:
    assert owner_labels({"apiVersion": "v1", "kind": "Pod"}) == ("", "Pod")
    assert owner_labels(pod_group_owner()) == ("scheduling.k8s.io", "PodGroup")


# -- member pods ---------------------------------------------------------------------------------


def member_cache(
    *pods: Pod, group: PodGroup | None = None, claims: list[ResourceClaim] | None = None
) -> ClusterCache:
    group = group or make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-abcde")])
    return cache_with(
        templates=[make_template()],
        claims=claims if claims is not None else [group_claim()],
        pod_groups=[group],
        pods=pods,
        workload_claims=True,
    )


def test_a_member_records_its_groups_claim_and_creates_none() -> None:
    cache = member_cache(member())
    api = FakeApi()
    assert api.run(sync_pod(cache, "demo", "m1", api)) == Done("kube-scheduler makes the reservations")
    assert api.of_type(CreateClaim) == []
    [apply] = api.of_type(ApplyPodStatus)
    assert apply.body["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "pg-gpu-abcde"}
    ]


def test_a_member_waits_silently_while_its_group_has_no_claim_yet() -> None:
    cache = member_cache(member(), group=make_pod_group(claims=[GPU]), claims=[])
    api = FakeApi()
    assert isinstance(api.run(sync_pod(cache, "demo", "m1", api)), Done)
    assert api.actions == []


def test_a_member_of_a_missing_group_gets_none_of_its_claims() -> None:
    cache = cache_with(templates=[make_template()], pods=[member(claims=[GPU, NIC])], workload_claims=True)
    api = FakeApi()
    result = api.run(sync_pod(cache, "demo", "m1", api))
    assert isinstance(result, Done)
    assert "PodGroup pg does not exist yet" in result.reason
    assert api.actions == []


def test_a_members_own_entries_stay_its_own() -> None:
    """An entry the group lacks, or one with another template, is the member's claim."""
    other = template_entry("gpu", "other-tmpl")
    cache = member_cache(member(claims=[NIC]), member("m2", "M2", claims=[other]))
    cache.apply_template_event(None, make_template("other-tmpl"))
    for name, owner_uid in (("m1", "M1"), ("m2", "M2")):
        api = FakeApi()
        api.run(sync_pod(cache, "demo", name, api))
        [create] = api.of_type(CreateClaim)
        assert create.body["metadata"]["ownerReferences"][0]["uid"] == owner_uid
        assert api.of_type(CountClaimCreate) == [CountClaimCreate("success", "false", "", "Pod")]


def test_a_recorded_group_claim_is_accepted_and_one_of_another_group_is_not() -> None:
    recorded = member(statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = member_cache(recorded)
    api = FakeApi()
    assert isinstance(api.run(sync_pod(cache, "demo", "m1", api)), Done)
    assert api.actions == []

    foreign = make_claim("other-gpu", owner_ref=pod_group_owner("other", "O"), entry="gpu")
    stray = member(statuses=[named_entry("gpu", "other-gpu")])
    cache = member_cache(stray, claims=[group_claim(), foreign])
    api = FakeApi()
    api.run(sync_pod(cache, "demo", "m1", api))
    # Re-pointed at its own group's claim, never a claim of its own.
    assert api.of_type(CreateClaim) == []
    [apply] = api.of_type(ApplyPodStatus)
    assert apply.body["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "pg-gpu-abcde"}
    ]


def test_where_podgroup_claims_are_off_a_group_owned_claim_is_still_refused() -> None:
    recorded = member(statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = cache_with(claims=[group_claim()], pods=[recorded])
    api = FakeApi()
    result = api.run(sync_pod(cache, "demo", "m1", api))
    assert isinstance(result, GiveUp)
    assert "PodGroup ResourceClaims are not supported" in result.error


def test_a_prescheduled_member_reserves_a_shared_claim_for_the_group_once() -> None:
    direct = named_entry("gpu", "shared")
    group = make_pod_group(claims=[direct])
    shared = make_claim("shared", allocated=True)
    m1 = member(claims=[direct], node_name="node-1")
    cache = member_cache(m1, group=group, claims=[shared])
    api = FakeApi()
    assert api.run(sync_pod(cache, "demo", "m1", api)) == Done()
    [put] = api.of_type(PutClaimStatus)
    assert put.body["status"]["reservedFor"] == [pod_group_consumer()]
    assert api.of_type(ApplyPodStatus) == []

    reserved = make_claim("shared", allocated=True, reserved_for=[pod_group_consumer()])
    cache.apply_claim_event("MODIFIED", reserved)
    m2 = member("m2", "M2", claims=[direct], node_name="node-1")
    assert cache.apply_pod_event(None, m2) == []
    api = FakeApi()
    assert api.run(sync_pod(cache, "demo", "m2", api)) == Done()
    assert api.actions == []


# -- releasing group reservations ----------------------------------------------------------------


def reserved_group_claim(**kwargs: Any) -> ResourceClaim:
    kwargs.setdefault("reserved_for", [pod_group_consumer()])
    return group_claim(allocated=True, finalizers=[FINALIZER], **kwargs)


@pytest.mark.parametrize(
    "group",
    [
        make_pod_group(claims=[GPU]),
        make_pod_group(claims=[GPU], deleting=True),
    ],
    ids=["existing", "terminating"],
)
def test_a_group_that_exists_keeps_its_reservation_when_members_finish(group: PodGroup) -> None:
    done = member(phase="Succeeded", statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = member_cache(done, group=group, claims=[reserved_group_claim()])
    api = FakeApi()
    assert api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS)) == Done(
        "claim is still in use"
    )
    assert api.actions == []


def test_a_deleted_group_is_dropped_and_its_claim_deallocated_but_not_deleted() -> None:
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = member_cache(group=group, claims=[reserved_group_claim()])
    cache.apply_pod_group_event(DELETED, group)
    api = FakeApi()
    result = api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS))
    assert result == Done("claim is not controlled by a pod")
    [status_put] = api.of_type(PutClaimStatus)
    assert status_put.body["status"]["reservedFor"] == []
    assert "allocation" not in status_put.body["status"]
    [put] = api.of_type(PutClaim)
    assert FINALIZER not in put.body["metadata"]["finalizers"]
    assert api.of_type(GetPodGroup) == []
    assert api.of_type(DeleteClaim) == []


@pytest.mark.parametrize(
    ("live", "kept"),
    [(None, False), ("G", True), ("G2", False)],
    ids=["gone", "same group", "replaced"],
)
def test_a_group_missing_from_the_cache_is_asked_for_live(live: str | None, kept: bool) -> None:
    cache = cache_with(claims=[reserved_group_claim()], workload_claims=True)
    api = FakeApi()
    if live is not None:
        api.live_pod_groups["pg"] = live
    api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS))
    assert api.of_type(GetPodGroup) == [GetPodGroup("demo", "pg")]
    assert (api.of_type(PutClaimStatus) == []) is kept


def test_a_replaced_group_in_the_cache_is_dropped_without_a_get() -> None:
    cache = member_cache(group=make_pod_group(uid="G2", claims=[GPU]), claims=[reserved_group_claim()])
    api = FakeApi()
    api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS))
    assert api.of_type(GetPodGroup) == []
    [status_put] = api.of_type(PutClaimStatus)
    assert status_put.body["status"]["reservedFor"] == []


def test_a_failed_live_get_retries() -> None:
    cache = cache_with(claims=[reserved_group_claim()], workload_claims=True)
    api = FakeApi()
    api.fail(GetPodGroup, Failed(503, "unavailable"))
    result = api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS))
    assert result == Retry("get PodGroup demo/pg: unavailable")


def test_where_podgroup_claims_are_off_a_group_reservation_is_someone_elses() -> None:
    cache = cache_with(
        claims=[reserved_group_claim(reserved_for=[pod_group_consumer(), pod_consumer("p", "P")])]
    )
    api = FakeApi()
    api.run(sync_claim(cache, "demo", "pg-gpu-abcde", api, POD_GROUPS))
    assert api.of_type(GetPodGroup) == []
    [status_put] = api.of_type(PutClaimStatus)
    assert status_put.body["status"]["reservedFor"] == [pod_group_consumer()]


# -- the served version (v1alpha2 on 1.36, v1beta1 on 1.37) ------------------------------------


def _v1alpha2(body: dict[str, Any]) -> dict[str, Any]:
    """The same group as 1.36 serves it: its own shapes of the fields nothing here reads."""
    body = dict(body, apiVersion="scheduling.k8s.io/v1alpha2")
    body["spec"] = {
        **body["spec"],
        "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
        "disruptionMode": "PodGroup",
    }
    return body


def test_one_projection_reads_both_served_versions() -> None:
    beta = pod_group_body(
        claims=[GPU, named_entry("nic", "shared-nic")], statuses=[named_entry("gpu", "pg-gpu-x")]
    )
    beta["spec"]["disruptionMode"] = {"all": {}}
    alpha = _v1alpha2(
        pod_group_body(
            claims=[GPU, named_entry("nic", "shared-nic")], statuses=[named_entry("gpu", "pg-gpu-x")]
        )
    )
    assert PodGroup.model_validate(alpha) == PodGroup.model_validate(beta)
    assert PodGroup.model_validate(alpha).spec.resource_claims[1].resource_claim_name == "shared-nic"


def test_a_group_served_as_v1alpha2_is_written_as_v1alpha2() -> None:
    group = PodGroup.model_validate(
        _v1alpha2(pod_group_body(claims=[GPU, template_entry("late", "late-tmpl")]))
    )
    cache = cache_with(templates=[make_template()], pod_groups=[group], workload_claims=True)
    cache.pod_group_api_version = "scheduling.k8s.io/v1alpha2"
    api = FakeApi()
    assert isinstance(api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)), Retry)
    [create] = api.of_type(CreateClaim)
    assert create.body["metadata"]["ownerReferences"] == [
        {**pod_group_owner(), "apiVersion": "scheduling.k8s.io/v1alpha2"}
    ]
    [event] = api.of_type(EmitEvent)
    assert event.api_version == "scheduling.k8s.io/v1alpha2"

    cache.apply_template_event(None, make_template("late-tmpl"))
    api = FakeApi()
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    [apply] = api.of_type(ApplyPodGroupStatus)
    assert apply.body["apiVersion"] == "scheduling.k8s.io/v1alpha2"


def test_a_claim_owned_by_the_group_in_either_version_is_the_groups() -> None:
    """Owner references are matched without their version, as upstream's: a claim generated
    while 1.36 served v1alpha2 stays the group's after an upgrade to 1.37's v1beta1."""
    alpha_owned = make_claim(
        "pg-gpu-abcde",
        owner_ref={**pod_group_owner(), "apiVersion": "scheduling.k8s.io/v1alpha2"},
        entry="gpu",
    )
    group = make_pod_group(claims=[GPU], statuses=[named_entry("gpu", "pg-gpu-abcde")])
    cache = cache_with(claims=[alpha_owned], pod_groups=[group], workload_claims=True)
    api = FakeApi()
    assert api.run(sync_pod_group(cache, "demo", "pg", api, POD_GROUPS)) == Done()
    assert api.writes() == []


def test_a_group_pass_plans_its_claim_create_then_its_status_apply_in_the_served_version() -> None:
    cache = cache_with(
        pod_groups=[make_pod_group(claims=[GPU])],
        templates=[make_template()],
        workload_claims=True,
    )
    plan = decide_pod_group(cache, "demo", "pg", POD_GROUPS, {})
    [create] = plan.steps
    assert isinstance(create, Create)
    assert create.body["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
    assert plan.result is DECIDE_AGAIN
    created = {**create.body["metadata"], "name": "pg-gpu-bcdfg", "uid": "N"}
    cache.record_created(ResourceClaim.from_body({**create.body, "metadata": created}))
    [apply] = decide_pod_group(cache, "demo", "pg", POD_GROUPS, {}).steps
    assert isinstance(apply, Apply)
    assert apply.path == POD_GROUPS.path("pg", namespace="demo", subresource="status")
    assert apply.body["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "pg-gpu-bcdfg"}
    ]
