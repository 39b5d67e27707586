"""The PodGroup ResourceClaims scenarios (KEP-5729, Kubernetes 1.37) as converging steps.

As in ``scenarios.py``, nothing here depends on who acts on the claims: the same steps run
against our operator and against the in-tree controller of an upstream-mode cluster, both with
the workload claims option, and the differential test compares the states they leave behind.
The scenarios share one namespace: ``group_template_claims`` creates the template ``gpu-tmpl``
that the later ones use.
"""

from __future__ import annotations

import re
from typing import Any

from devcluster.kube import wait_for
from e2e.resourceclaim.scenarios import TIMEOUT, Ctx, allocated_user_claim, common_template
from e2e.resourceclaim.support import (
    DELETE_PROTECTION_FINALIZER,
    FAILED_CREATION,
    GENERATED_SUFFIX,
    allocate,
    assert_generated_claim,
    assert_unchanged,
    claim_statuses,
    claims_of_pod,
    claims_path,
    create_pod,
    create_podgroup,
    finalizers,
    group_claim_statuses,
    group_consumer,
    is_allocated,
    named_entry,
    object_events,
    pod_body,
    pod_events,
    podgroup_body,
    podgroups_path,
    reserved_for,
    set_phase,
    template_entry,
    wait_claim,
    wait_generated,
    wait_group_claim,
)

PODGROUP_FINALIZER = "scheduling.k8s.io/podgroup-protection"
LATE_TEMPLATE_MESSAGE = (
    'PodGroupResourceClaim gpu: resource claim template "late-tmpl": '
    'resourceclaimtemplate.resource.k8s.io "late-tmpl" not found'
)
# Long enough for a controller that would wrongly act on a change to have done so: the
# controllers react within a second in every other scenario.
OBSERVE = 3.0


def members(
    ctx: Ctx, group: str, names: list[str], claims: list[dict[str, str]], node: str | None = None
) -> list[dict[str, Any]]:
    return [create_pod(ctx.api, ctx.ns, pod_body(n, claims, node_name=node, group=group)) for n in names]


def wait_statuses(ctx: Ctx, pod: str, expected: list[dict[str, str]]) -> None:
    wait_for(
        lambda: claim_statuses(ctx.api, ctx.ns, pod) == expected,
        TIMEOUT,
        f"the status of {pod} to be {expected}",
    )


def claim_state(ctx: Ctx, name: str) -> tuple[Any, ...] | None:
    """What a release or a deletion would change on a claim."""
    claim = ctx.api.get_or_none(claims_path(ctx.ns, name))
    if claim is None:
        return None
    meta = claim["metadata"]
    return (reserved_for(claim), is_allocated(claim), finalizers(claim), "deletionTimestamp" in meta)


def group_reserved(ctx: Ctx, claim: str, group: dict[str, Any]) -> dict[str, Any]:
    return wait_claim(
        ctx.api,
        ctx.ns,
        claim,
        lambda c: reserved_for(c) == [group_consumer(group)],
        f"{claim} to be reserved for PodGroup {group['metadata']['name']}",
    )


# -- claims from templates ------------------------------------------------------------------


def group_template_claims(ctx: Ctx) -> tuple[dict[str, Any], dict[str, Any]]:
    """One claim for the group entry, shared by both members; a member's own entry still gets a
    claim of its own."""
    common_template(ctx)
    group = create_podgroup(ctx.api, ctx.ns, podgroup_body("pg", [template_entry("gpu", "gpu-tmpl")]))
    m1 = create_pod(
        ctx.api,
        ctx.ns,
        pod_body("pg-m1", [template_entry("gpu", "gpu-tmpl"), template_entry("nic", "gpu-tmpl")], group="pg"),
    )
    (m2,) = members(ctx, "pg", ["pg-m2"], [template_entry("gpu", "gpu-tmpl")])
    claim = wait_group_claim(ctx.api, ctx.ns, group, "gpu")
    assert_generated_claim(ctx.api, ctx.ns, claim, group, "pg-gpu-")
    meta = claim["metadata"]
    assert group_claim_statuses(ctx.api, ctx.ns, "pg") == [{"name": "gpu", "resourceClaimName": meta["name"]}]

    nic = wait_generated(ctx.api, ctx.ns, m1, "nic")
    assert re.fullmatch(f"pg-m1-nic-{GENERATED_SUFFIX}", nic["metadata"]["name"])
    wait_statuses(
        ctx,
        "pg-m1",
        [
            {"name": "gpu", "resourceClaimName": meta["name"]},
            {"name": "nic", "resourceClaimName": nic["metadata"]["name"]},
        ],
    )
    wait_statuses(ctx, "pg-m2", [{"name": "gpu", "resourceClaimName": meta["name"]}])
    assert [c["metadata"]["name"] for c in claims_of_pod(ctx.api, ctx.ns, m1)] == [nic["metadata"]["name"]]
    assert claims_of_pod(ctx.api, ctx.ns, m2) == []
    assert len(claims_of_pod(ctx.api, ctx.ns, group)) == 1
    return group, claim


def group_late_template(ctx: Ctx) -> dict[str, Any]:
    """The group waits for its template with a Warning on the PodGroup; its members wait
    silently, since the group, not they, creates the claim."""
    group = create_podgroup(ctx.api, ctx.ns, podgroup_body("pgl", [template_entry("gpu", "late-tmpl")]))
    members(ctx, "pgl", ["pgl-m1", "pgl-m2"], [template_entry("gpu", "late-tmpl")])
    event = wait_for(
        lambda: [
            e
            for e in object_events(ctx.api, ctx.ns, "PodGroup", "pgl")
            if e["reason"] == FAILED_CREATION and e["message"] == LATE_TEMPLATE_MESSAGE
        ],
        TIMEOUT,
        "the missing-template Event on the PodGroup",
    )[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert event["involvedObject"]["uid"] == group["metadata"]["uid"]
    assert claims_of_pod(ctx.api, ctx.ns, group) == []
    assert group_claim_statuses(ctx.api, ctx.ns, "pgl") == []
    for pod in ("pgl-m1", "pgl-m2"):
        assert claim_statuses(ctx.api, ctx.ns, pod) == [], pod
        assert pod_events(ctx.api, ctx.ns, pod) == [], pod
    return group


def group_late_template_created(ctx: Ctx, group: dict[str, Any], within: float = TIMEOUT) -> None:
    """The template's creation completes the group and then its members."""
    common_template(ctx, "late-tmpl")
    claim = wait_group_claim(ctx.api, ctx.ns, group, "gpu", timeout=within)
    for pod in ("pgl-m1", "pgl-m2"):
        wait_statuses(ctx, pod, [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}])


# -- members that bypass the scheduler --------------------------------------------------------


def group_direct_claim(ctx: Ctx) -> None:
    """A user claim shared by the group: nothing is created or recorded, and the allocated claim
    is reserved for the group once, not for each member."""
    allocated_user_claim(ctx, "pgd-shared")
    group = create_podgroup(ctx.api, ctx.ns, podgroup_body("pgd", [named_entry("gpu", "pgd-shared")]))
    members(ctx, "pgd", ["pgd-m1", "pgd-m2"], [named_entry("gpu", "pgd-shared")], node=ctx.node)
    claim = group_reserved(ctx, "pgd-shared", group)
    assert is_allocated(claim)
    assert group_claim_statuses(ctx.api, ctx.ns, "pgd") == []
    for pod in ("pgd-m1", "pgd-m2"):
        assert claim_statuses(ctx.api, ctx.ns, pod) == [], pod
    assert claims_of_pod(ctx.api, ctx.ns, group) == []


def group_member_finishes(ctx: Ctx) -> None:
    """A member that finishes while another runs leaves the group's claim as it is: the entry
    in reservedFor is the group's, not the member's."""
    group = create_podgroup(ctx.api, ctx.ns, podgroup_body("pgf", [template_entry("gpu", "gpu-tmpl")]))
    members(ctx, "pgf", ["pgf-m1", "pgf-m2"], [template_entry("gpu", "gpu-tmpl")], node=ctx.node)
    name = wait_group_claim(ctx.api, ctx.ns, group, "gpu")["metadata"]["name"]
    allocate(ctx.api, ctx.ns, name)
    group_reserved(ctx, name, group)
    set_phase(ctx.api, ctx.ns, "pgf-m2", "Running")
    set_phase(ctx.api, ctx.ns, "pgf-m1", "Succeeded")
    state = assert_unchanged(lambda: claim_state(ctx, name), OBSERVE, f"the group claim {name}")
    assert state == ([group_consumer(group)], True, [DELETE_PROTECTION_FINALIZER], False)


def group_deletion(ctx: Ctx) -> None:
    """A terminating group keeps its reservations; once its members are terminal and the group
    is gone, both claims are released, the generated one is garbage-collected and the user's
    claim stays."""
    allocated_user_claim(ctx, "pgx-shared")
    group = create_podgroup(
        ctx.api,
        ctx.ns,
        podgroup_body("pgx", [template_entry("gpu", "gpu-tmpl"), named_entry("dev", "pgx-shared")]),
    )
    entries = [template_entry("gpu", "gpu-tmpl"), named_entry("dev", "pgx-shared")]
    members(ctx, "pgx", ["pgx-m1", "pgx-m2"], entries, node=ctx.node)
    generated = wait_group_claim(ctx.api, ctx.ns, group, "gpu")["metadata"]["name"]
    allocate(ctx.api, ctx.ns, generated)
    for claim in (generated, "pgx-shared"):
        group_reserved(ctx, claim, group)
    for pod in ("pgx-m1", "pgx-m2"):
        wait_statuses(ctx, pod, [{"name": "gpu", "resourceClaimName": generated}])

    ctx.api.delete(podgroups_path(ctx.ns, "pgx"))
    terminating = ctx.api.get(podgroups_path(ctx.ns, "pgx"))
    assert terminating["metadata"].get("deletionTimestamp")
    assert PODGROUP_FINALIZER in finalizers(terminating)
    assert_unchanged(
        lambda: (claim_state(ctx, generated), claim_state(ctx, "pgx-shared")),
        OBSERVE,
        "the claims of the terminating group",
    )

    for pod in ("pgx-m1", "pgx-m2"):
        set_phase(ctx.api, ctx.ns, pod, "Succeeded")
    wait_for(
        lambda: ctx.api.get_or_none(podgroups_path(ctx.ns, "pgx")) is None,
        TIMEOUT,
        "the PodGroup to go once its members are terminal",
    )
    wait_for(lambda: claim_state(ctx, generated) is None, TIMEOUT, "the generated claim to be collected")
    wait_for(
        lambda: claim_state(ctx, "pgx-shared") == ([], False, [], False),
        TIMEOUT,
        "the user claim to be released",
    )
