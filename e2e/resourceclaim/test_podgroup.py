"""PodGroup ResourceClaims (KEP-5729) with our operator: the real kube-scheduler binds a group's
members with the group's claim, and the claims survive SIGKILLs of the operator.

The scenarios compared with the in-tree controller are in ``test_podgroup_differential.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from e2e.cluster.nodes import make_devices
from e2e.kube import Kube, wait_for
from e2e.resourceclaim.support import (
    DELETE_PROTECTION_FINALIZER,
    POD_CLAIM_NAME,
    claim_statuses,
    claims,
    claims_of_pod,
    claims_path,
    create_pod,
    create_podgroup,
    create_template,
    group_consumer,
    pod_body,
    podgroup_body,
    podgroups_path,
    pods_path,
    template_body,
    template_entry,
    wait_group_claim,
)

pytestmark = pytest.mark.workload_claims

GROUPS = 50


def test_scheduler_binds_members_with_the_group_claim(
    api: Kube,
    namespace: str,
    unique_name: Callable[[str], str],
    driver_name: str,
    fake_node: Callable[..., Any],
    resource_slice: Callable[..., Any],
    device_class: Callable[..., Any],
    operator: Callable[..., Any],
) -> None:
    """A gang of two on a fake node with two devices: both members are bound with the one
    claim our operator generated for the group, which kube-scheduler allocates and reserves
    for the group, not for each member."""
    node = unique_name("node")
    fake_node(node)
    cls = unique_name("class")
    device_class(cls, driver_name)
    resource_slice(node, driver_name, make_devices(2))
    create_template(api, namespace, template_body("gpu-tmpl", device_class=cls))
    entry = template_entry("gpu", "gpu-tmpl")

    with operator("resourceclaim"):
        group = create_podgroup(api, namespace, podgroup_body("pg", [entry], gang=2))
        pods = [
            create_pod(api, namespace, pod_body(name, [entry], scheduled=True, group="pg"))
            for name in ("m1", "m2")
        ]
        name = wait_group_claim(api, namespace, group, "gpu")["metadata"]["name"]

        def bound() -> list[dict[str, Any]] | None:
            current = [api.get(pods_path(namespace, p["metadata"]["name"])) for p in pods]
            return current if all(_bound_to(p, node) for p in current) else None

        wait_for(bound, 60, "both members to be bound to the fake node")

    claim = api.get(claims_path(namespace, name))
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"]) for r in results] == [(driver_name, node)]
    assert claim["status"]["reservedFor"] == [group_consumer(group)]
    assert DELETE_PROTECTION_FINALIZER in claim["metadata"]["finalizers"]
    for pod in pods:
        assert claim_statuses(api, namespace, pod["metadata"]["name"]) == [
            {"name": "gpu", "resourceClaimName": name}
        ]
        assert claims_of_pod(api, namespace, pod) == []
    assert [c["metadata"]["name"] for c in claims(api, namespace)] == [name]


def _bound_to(pod: dict[str, Any], node: str) -> bool:
    conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
    return pod["spec"].get("nodeName") == node and conditions.get("PodScheduled") == "True"


def test_sigkill_while_creating_group_claims(api: Kube, namespace: str, operator: Callable[..., Any]) -> None:
    """50 PodGroups of one template entry and one member each; the operator is SIGKILLed at
    about a third and two thirds of the claims and restarted each time. In the end each group
    has exactly one claim, its status names it, and so does its member's.

    The operator keeps its default client rate (kube-controller-manager's): it spreads the
    three writes per group over seconds, where unthrottled it would finish 50 groups between
    two polls of the test."""
    create_template(api, namespace, template_body("gpu-tmpl"))
    entry = template_entry("gpu", "gpu-tmpl")
    names = [f"g-{i}" for i in range(GROUPS)]

    def create(name: str) -> dict[str, Any]:
        group = create_podgroup(api, namespace, podgroup_body(name, [entry]))
        create_pod(api, namespace, pod_body(f"{name}-m", [entry], group=name))
        return group

    def count() -> int:
        return len(claims(api, namespace))

    with ThreadPoolExecutor(8) as pool:
        with operator("resourceclaim") as first:
            creations = [pool.submit(create, name) for name in names]
            wait_for(lambda: count() >= GROUPS / 3, 60, "a third of the claims", interval=0.1)
            first.kill()
            at_first_kill = count()
        groups = [future.result() for future in creations]
    with operator("resourceclaim") as second:
        wait_for(lambda: count() >= 2 * GROUPS / 3, 60, "two thirds of the claims", interval=0.1)
        second.kill()
        at_second_kill = count()
    with operator("resourceclaim") as third:
        wait_for(
            lambda: all(_recorded(api, namespace, name) for name in names),
            90,
            "every group and member to name a claim",
            interval=1.0,
        )
        _assert_one_claim_each(api, namespace, groups)
        assert third.ready()
    # Both kills hit the burst, not its end.
    assert at_first_kill < at_second_kill < GROUPS, (at_first_kill, at_second_kill)
    print(f"claims at the kills: {at_first_kill}, {at_second_kill} of {GROUPS}")


def _recorded(api: Kube, ns: str, group: str) -> bool:
    statuses = (api.get(podgroups_path(ns, group)).get("status") or {}).get("resourceClaimStatuses") or []
    return bool(statuses) and bool(claim_statuses(api, ns, f"{group}-m"))


def _assert_one_claim_each(api: Kube, ns: str, groups: list[dict[str, Any]]) -> None:
    """Zero missing, zero duplicates: one claim per (PodGroup UID, entry), named by the group's
    status and by its member's."""
    by_owner: dict[str, list[str]] = {}
    for claim in claims(api, ns):
        meta = claim["metadata"]
        assert meta["annotations"][POD_CLAIM_NAME] == "gpu", meta
        (owner,) = [o for o in meta["ownerReferences"] if o.get("controller")]
        assert owner["kind"] == "PodGroup", meta
        by_owner.setdefault(owner["uid"], []).append(meta["name"])
    missing, duplicated, mismatched = [], [], []
    for group in groups:
        name = group["metadata"]["name"]
        owned = by_owner.get(group["metadata"]["uid"], [])
        if not owned:
            missing.append(name)
            continue
        if len(owned) > 1:
            duplicated.append((name, owned))
            continue
        recorded = {
            "group": (api.get(podgroups_path(ns, name))["status"]["resourceClaimStatuses"]),
            "member": claim_statuses(api, ns, f"{name}-m"),
        }
        expected = [{"name": "gpu", "resourceClaimName": owned[0]}]
        if recorded != {"group": expected, "member": expected}:
            mismatched.append((name, recorded, owned[0]))
    assert (missing, duplicated, mismatched) == ([], [], []), "missing, duplicated, mismatched claims"
    assert sum(len(v) for v in by_owner.values()) == GROUPS
