"""D1-D6 of spec section 4, the pod routing of section 5, and the work keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from resourceclaim_builders import (
    make_claim,
    make_pod,
    make_pod_group,
    named_entry,
    pod_consumer,
    template_entry,
)

from operators.core.keys import CLAIM, POD, Key
from operators.dra.claims import ConsumerReference
from operators.dra.podgroups import PodGroup, PodGroupResourceClaimStatus
from operators.dra.pods import PodResourceClaim, PodResourceClaimStatus
from operators.resourceclaim.models import Pod, ResourceClaim, ResourceClaimSpec
from operators.resourceclaim.resolution import (
    Resolution,
    Resolved,
    admin_access_label,
    is_controlled_by_pod,
    is_pod_consumer,
    is_pod_done,
    is_reserved_for_pod,
    not_created_message,
    owning_pod,
    pod_group_controller,
    pod_group_needs_work,
    pod_needs_work,
    resolve_entries,
    resolve_entry,
    resolve_group_entries,
    resolve_group_entry,
    resolved_claim_names,
    route_pod,
    route_pod_group,
    unsupported_message,
)


def lookup(*claims: ResourceClaim) -> dict[tuple[str, str], ResourceClaim]:
    return {(claim.namespace, claim.name): claim for claim in claims}


def no_claims(namespace: str, name: str) -> ResourceClaim | None:
    return None


# D1


def test_d1_claim_name_entry_needs_no_owner_check() -> None:
    pod = make_pod(claims=[named_entry("gpu", "shared")])
    assert resolve_entry(pod, pod.spec.resource_claims[0]) == Resolution(Resolved.NAMED, "shared")


def test_d1_template_entry_with_status_needs_owner_check() -> None:
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}],
    )
    assert resolve_entry(pod, pod.spec.resource_claims[0]) == Resolution(
        Resolved.NAMED, "my-pod-gpu-abcde", check_owner=True
    )


def test_d1_template_entry_with_status_but_no_name_is_skipped() -> None:
    pod = make_pod(claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu"}])
    assert resolve_entry(pod, pod.spec.resource_claims[0]).outcome is Resolved.SKIPPED


def test_d1_template_entry_without_status_is_not_created_yet() -> None:
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "other", "resourceClaimName": "x"}],
    )
    assert resolve_entry(pod, pod.spec.resource_claims[0]).outcome is Resolved.NOT_CREATED
    assert not_created_message(pod) == 'pod "demo/my-pod": ResourceClaim not created yet'


def test_d1_entry_with_neither_field_is_unsupported() -> None:
    pod = make_pod(claims=[{"name": "gpu"}])
    entry = pod.spec.resource_claims[0]
    assert resolve_entry(pod, entry).outcome is Resolved.UNSUPPORTED
    assert unsupported_message(pod, entry) == (
        'pod "demo/my-pod", spec.resourceClaim "gpu": none of the supported fields are set'
    )


# D2


def test_d2_controlled_by_pod() -> None:
    pod = make_pod(uid="U")
    assert is_controlled_by_pod(make_claim("c", owner=("my-pod", "U")), pod)
    assert not is_controlled_by_pod(make_claim("c", owner=("my-pod", "OTHER")), pod)
    assert not is_controlled_by_pod(make_claim("c"), pod)
    assert not is_controlled_by_pod(make_claim("c", owner=("my-pod", "U"), namespace="elsewhere"), pod)
    not_controller = {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": "U"}
    assert not is_controlled_by_pod(make_claim("c", owner_ref=not_controller), pod)


# D3


@pytest.mark.parametrize(
    ("phase", "deleting", "node_name", "done"),
    [
        ("Succeeded", False, "node-1", True),
        ("Failed", False, "", True),
        ("Pending", True, "", True),
        ("Running", True, "node-1", False),
        ("Running", False, "node-1", False),
        ("Pending", False, "", False),
    ],
)
def test_d3_pod_done(phase: str, deleting: bool, node_name: str, done: bool) -> None:
    assert is_pod_done(make_pod(phase=phase, deleting=deleting, node_name=node_name)) is done


# D4, D5


def test_d4_reserved_for_pod_matches_uid_of_any_entry() -> None:
    claim = make_claim("c", reserved_for=[pod_consumer("other", "X"), pod_consumer("my-pod", "U")])
    assert is_reserved_for_pod(claim, "U")
    assert not is_reserved_for_pod(claim, "V")


@pytest.mark.parametrize(
    ("consumer", "is_pod"),
    [
        ({"resource": "pods", "name": "p", "uid": "U"}, True),
        ({"apiGroup": "", "resource": "pods", "name": "p", "uid": "U"}, True),
        ({"apiGroup": "example.com", "resource": "pods", "name": "p", "uid": "U"}, False),
        ({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "G"}, False),
        ({"apiGroup": "example.com", "resource": "widgets", "name": "w", "uid": "W"}, False),
    ],
)
def test_d5_pod_consumer(consumer: dict[str, str], is_pod: bool) -> None:
    assert is_pod_consumer(ConsumerReference.model_validate(consumer)) is is_pod


# D6


@pytest.mark.parametrize(
    ("requests", "label"),
    [
        ([], "false"),
        ([{"name": "a", "exactly": {"deviceClassName": "c"}}], "false"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": False}}], "false"),
        (
            [
                {"name": "a", "exactly": {"deviceClassName": "c"}},
                {"name": "b", "exactly": {"adminAccess": True}},
            ],
            "true",
        ),
        ([{"name": "a", "firstAvailable": [{"name": "s", "adminAccess": True}]}], "false"),
    ],
)
def test_d6_admin_access_label(requests: list[dict[str, object]], label: str) -> None:
    spec = ResourceClaimSpec.model_validate({"devices": {"requests": requests}})
    assert admin_access_label(spec) == label


# Owner helpers


def test_pod_group_controller_needs_kind_and_scheduling_group() -> None:
    group_ref = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "g", "uid": "G"}
    assert pod_group_controller(make_claim("c", owner_ref={**group_ref, "controller": True})) is not None
    assert pod_group_controller(make_claim("c", owner_ref=group_ref)) is None
    other_group = {**group_ref, "apiVersion": "example.com/v1", "controller": True}
    assert pod_group_controller(make_claim("c", owner_ref=other_group)) is None


def test_owning_pod_is_the_controlling_v1_pod() -> None:
    owner = owning_pod(make_claim("c", owner=("p", "U")))
    assert owner is not None
    assert (owner.name, owner.uid) == ("p", "U")
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "J", "controller": True}
    assert owning_pod(make_claim("c", owner_ref=job)) is None
    assert owning_pod(make_claim("c")) is None


# Keys


def test_work_keys_name_the_kind_in_the_type() -> None:
    pod = make_pod("p", claims=[{"name": "gpu", "resourceClaimName": "c"}], phase="Succeeded")
    keys = route_pod(pod, removed=True, lookup_claim=lambda ns, name: None)
    assert keys == [Key(CLAIM, pod.namespace, "c")]
    assert all(key.uid == "" for key in keys), "resourceclaim's work is about names, not incarnations"


# Section 5: pod needs work.


def test_needs_work_for_claim_not_created_yet() -> None:
    pod = make_pod(claims=[template_entry("gpu", "gpu-tmpl")])
    assert pod_needs_work(pod, no_claims)[0]


def test_needs_work_for_unsupported_entry() -> None:
    assert pod_needs_work(make_pod(claims=[{"name": "gpu"}]), no_claims)[0]


def test_no_work_for_deleted_or_terminal_pods() -> None:
    entries = [template_entry("gpu", "gpu-tmpl")]
    assert not pod_needs_work(make_pod(claims=entries, deleting=True), no_claims)[0]
    assert not pod_needs_work(make_pod(claims=entries, phase="Succeeded"), no_claims)[0]
    assert not pod_needs_work(make_pod(claims=entries, phase="Failed"), no_claims)[0]


def test_missing_recorded_template_claim_needs_work_but_missing_user_claim_does_not() -> None:
    recorded = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu", "resourceClaimName": "gone"}]
    )
    assert pod_needs_work(recorded, no_claims)[0]
    assert not pod_needs_work(make_pod(claims=[named_entry("gpu", "shared")]), no_claims)[0]


def test_skipped_entry_needs_no_work() -> None:
    pod = make_pod(claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu"}])
    assert not pod_needs_work(pod, no_claims)[0]


def test_prescheduled_pod_needs_work_only_for_allocated_unreserved_claims() -> None:
    pod = make_pod(uid="U", claims=[named_entry("gpu", "shared")], node_name="node-1")
    claims = lookup(make_claim("shared", allocated=True))
    assert pod_needs_work(pod, lambda ns, name: claims.get((ns, name)))[0]

    reserved = lookup(make_claim("shared", allocated=True, reserved_for=[pod_consumer("my-pod", "U")]))
    assert not pod_needs_work(pod, lambda ns, name: reserved.get((ns, name)))[0]

    unallocated = lookup(make_claim("shared"))
    assert not pod_needs_work(pod, lambda ns, name: unallocated.get((ns, name)))[0]

    unscheduled = make_pod(uid="U", claims=[named_entry("gpu", "shared")])
    assert not pod_needs_work(unscheduled, lambda ns, name: claims.get((ns, name)))[0]


def test_claim_not_owned_by_pod_is_passed_over() -> None:
    pod = make_pod(
        uid="U",
        claims=[template_entry("gpu", "gpu-tmpl")],
        statuses=[{"name": "gpu", "resourceClaimName": "x"}],
        node_name="node-1",
    )
    claims = lookup(make_claim("x", owner=("my-pod", "OTHER"), allocated=True))
    assert not pod_needs_work(pod, lambda ns, name: claims.get((ns, name)))[0]


def test_scenario_15_terminal_prescheduled_pod_is_never_routed_for_reservation() -> None:
    pod = make_pod("p", "P", claims=[named_entry("gpu", "shared")], node_name="node-1", phase="Succeeded")
    claims = lookup(make_claim("shared", allocated=True, reserved_for=[pod_consumer("q", "Q")]))
    assert not pod_needs_work(pod, lambda ns, name: claims.get((ns, name)))[0]
    assert route_pod(pod, removed=False, lookup_claim=lambda ns, name: claims.get((ns, name))) == [
        Key(CLAIM, "demo", "shared")
    ]


# Section 5: routing.


def test_pod_without_claims_is_not_routed() -> None:
    assert route_pod(make_pod(), removed=True, lookup_claim=no_claims) == []
    assert route_pod(make_pod(phase="Succeeded"), removed=False, lookup_claim=no_claims) == []


def test_done_pod_routes_every_resolved_claim_and_the_extended_claim() -> None:
    pod = make_pod(
        claims=[
            template_entry("gpu", "gpu-tmpl"),
            named_entry("nic", "shared"),
            template_entry("later", "t"),
            template_entry("skip", "t"),
        ],
        statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}, {"name": "skip"}],
        phase="Failed",
        extended_claim="my-pod-extended-resources-xyz12",
    )
    assert route_pod(pod, removed=False, lookup_claim=no_claims) == [
        Key(CLAIM, "demo", "my-pod-gpu-abcde"),
        Key(CLAIM, "demo", "shared"),
        Key(CLAIM, "demo", "my-pod-extended-resources-xyz12"),
    ]


def test_removed_pod_routes_its_claims_but_never_itself() -> None:
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu", "resourceClaimName": "c"}]
    )
    assert route_pod(pod, removed=True, lookup_claim=no_claims) == [Key(CLAIM, "demo", "c")]


def test_running_pod_routes_only_itself_when_it_needs_work() -> None:
    pod = make_pod(claims=[template_entry("gpu", "gpu-tmpl")])
    assert route_pod(pod, removed=False, lookup_claim=no_claims) == [Key(POD, "demo", "my-pod")]


def test_deleted_scheduled_pod_is_not_done_and_needs_no_work() -> None:
    # Scenario 22: the reservation stays until the phase is terminal or the pod is removed.
    pod = make_pod(claims=[named_entry("gpu", "shared")], node_name="node-1", phase="Running", deleting=True)
    assert route_pod(pod, removed=False, lookup_claim=no_claims) == []


def test_extended_only_pod_is_routed_when_done() -> None:
    pod = make_pod(phase="Succeeded", extended_claim="ext")
    assert route_pod(pod, removed=False, lookup_claim=no_claims) == [Key(CLAIM, "demo", "ext")]


def test_null_fields_read_as_absent() -> None:
    entry = PodResourceClaim.model_validate({"name": "gpu", "resourceClaimName": None})
    assert entry.resource_claim_name is None


# Duplicate status entries: the first of a name counts, as upstream's ``resourceclaim.Name``.


DUPLICATED_STATUSES = [
    named_entry("gpu", "first"),
    named_entry("gpu", "second"),
    {"name": "nic"},
    named_entry("nic", "after-skip"),
]
TWO_TEMPLATES = [template_entry("gpu", "gpu-tmpl"), template_entry("nic", "nic-tmpl")]


def test_duplicate_pod_status_entries_resolve_to_the_first() -> None:
    pod = make_pod(claims=TWO_TEMPLATES, statuses=DUPLICATED_STATUSES, phase="Failed")
    gpu, nic = pod.spec.resource_claims
    assert resolve_entry(pod, gpu) == Resolution(Resolved.NAMED, "first", check_owner=True)
    assert resolve_entry(pod, nic).outcome is Resolved.SKIPPED
    assert list(resolve_entries(pod)) == [(gpu, resolve_entry(pod, gpu)), (nic, resolve_entry(pod, nic))]
    assert route_pod(pod, removed=False, lookup_claim=no_claims) == [Key(CLAIM, "demo", "first")]


def test_duplicate_pod_group_status_entries_resolve_to_the_first() -> None:
    group = make_pod_group(claims=TWO_TEMPLATES, statuses=DUPLICATED_STATUSES)
    gpu, nic = group.spec.resource_claims
    assert resolve_group_entry(group, gpu) == Resolution(Resolved.NAMED, "first", check_owner=True)
    assert resolve_group_entry(group, nic).outcome is Resolved.SKIPPED
    assert list(resolve_group_entries(group)) == [
        (gpu, resolve_group_entry(group, gpu)),
        (nic, resolve_group_entry(group, nic)),
    ]
    assert route_pod_group(group, removed=True, lookup_claim=no_claims) == [Key(CLAIM, "demo", "first")]
    # "first" is missing, so the group needs work for it; a skipped "nic" never would.
    assert pod_group_needs_work(group, no_claims) == (True, "claim first must be re-created")


# A tenant sets how many entries a pod has: resolving them all reads the statuses once, not once
# per entry, which made every pod event and every event of one of its claims quadratic.

MANY = 2000

_Status = PodResourceClaimStatus | PodGroupResourceClaimStatus
_Owner = TypeVar("_Owner", Pod, PodGroup)


class CountingStatuses(tuple[_Status, ...]):
    """``status.resourceClaimStatuses`` that count the entries read from them."""

    read = 0

    def __iter__(self) -> Iterator[_Status]:
        for status in super().__iter__():
            self.read += 1
            yield status


def with_counted_statuses(owner: _Owner) -> tuple[_Owner, CountingStatuses]:
    statuses = CountingStatuses(owner.status.resource_claim_statuses)
    status = owner.status.model_copy(update={"resource_claim_statuses": statuses})
    return owner.model_copy(update={"status": status}), statuses


def many_template_entries() -> list[dict[str, str]]:
    return [template_entry(f"e{index}", "gpu-tmpl") for index in range(MANY)]


def many_statuses() -> list[dict[str, str]]:
    # Reversed, so that a scan per entry would read half the statuses on average.
    return [named_entry(f"e{index}", f"claim-{index}") for index in reversed(range(MANY))]


def test_resolving_many_entries_reads_the_statuses_once() -> None:
    pod, statuses = with_counted_statuses(make_pod(claims=many_template_entries(), statuses=many_statuses()))
    assert list(resolved_claim_names(pod)) == [f"claim-{index}" for index in range(MANY)]
    assert statuses.read == MANY


def assert_routed_reading_statuses_once(
    route: Callable[..., list[Key]], subject: Any, statuses: Any, claim: ResourceClaim
) -> None:
    """Routing ``subject``, as it stands and once removed, reads its statuses once each time."""
    assert route(subject, removed=False, lookup_claim=lambda ns, name: claim) == []
    assert statuses.read == MANY
    statuses.read = 0
    removed = route(subject, removed=True, lookup_claim=lambda ns, name: claim)
    assert removed == [Key(CLAIM, "demo", f"claim-{index}") for index in range(MANY)]
    assert statuses.read == MANY


def test_routing_a_pod_with_many_entries_reads_its_statuses_once_per_resolution() -> None:
    pod, statuses = with_counted_statuses(
        make_pod(claims=many_template_entries(), statuses=many_statuses(), node_name="node-1")
    )
    # One claim stands for all of them: owned, allocated and reserved, so every entry is checked.
    claim = make_claim(
        "any", owner=("my-pod", "U"), allocated=True, reserved_for=[pod_consumer("my-pod", "U")]
    )
    assert_routed_reading_statuses_once(route_pod, pod, statuses, claim)


def test_routing_a_pod_group_with_many_entries_reads_its_statuses_once_per_resolution() -> None:
    group, statuses = with_counted_statuses(
        make_pod_group(claims=many_template_entries(), statuses=many_statuses())
    )
    claim = make_claim("any")
    assert_routed_reading_statuses_once(route_pod_group, group, statuses, claim)
