"""Least privilege of the resourceclaim operator (spec section 11).

The shipped roles grant exactly the operator's declared API calls, and the one permission
that is easy to miss, ``resourceclaims/binding``, is shown to be needed on a 1.37 cluster:
with DRAResourceClaimGranularStatusAuthorization on, a status update that changes
``reservedFor`` is refused without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import ApiError, Kube
from e2e import harness
from e2e.resourceclaim.support import (
    allocate,
    claim_body,
    claims_path,
    create_claim,
    reserved_for,
)
from e2e.support import Tracker
from operators.resourceclaim.operator import API_CALLS, PROBE_CALLS

NAME = "dra-operators-resourceclaim"
GATE = "DRAResourceClaimGranularStatusAuthorization"


def _granted(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in obj["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def _find(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == NAME]
    assert len(found) == 1, f"manifests/ must define one {kind} {NAME}"
    return found[0]


def test_roles_grant_exactly_the_api_calls(cluster: harness.Cluster) -> None:
    objects = harness.rbac_objects(cluster)
    cluster_role, role = _find(objects, "ClusterRole"), _find(objects, "Role")
    assert _granted(cluster_role) | _granted(role) == set(API_CALLS)
    leases = {call for call in API_CALLS if call[0] == "coordination.k8s.io"}
    # The Role, in the operator's namespace: its Lease, and the coexistence probe's pod and template.
    assert _granted(role) == leases | set(PROBE_CALLS)
    assert role["metadata"]["namespace"] == harness.OPERATOR_NAMESPACE
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = _find(objects, kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": NAME,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": NAME, "namespace": harness.OPERATOR_NAMESPACE}
        ]


def test_reserved_for_needs_the_binding_subresource(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    objects: Tracker,
    operator_identity: Callable[[str], str],
) -> None:
    """Spec section 16: the 1.37 state of the gate and whether ``resourceclaims/binding``
    is needed. A copy of our ClusterRole without that rule cannot drop a reservation; our
    ServiceAccount can."""
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    assert f'kubernetes_feature_enabled{{name="{GATE}",stage="BETA"}} 1' in metrics

    create_claim(api, namespace, claim_body("claim"))
    consumer = {"resource": "pods", "name": "gone", "uid": "0000-gone"}
    allocate(api, namespace, "claim", [consumer])

    ours = harness.rbac_objects(cluster)
    rules = [r for r in _find(ours, "ClusterRole")["rules"] if "resourceclaims/binding" not in r["resources"]]
    account = "no-binding"
    api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
    )
    role_name = f"e2e-{namespace}-no-binding"
    objects.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role_name},
            "rules": rules,
        },
    )
    objects.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )

    def drop_reservation(client: Kube) -> Any:
        claim = client.get(claims_path(namespace, "claim"))
        claim["status"]["reservedFor"] = []
        return client.replace(claims_path(namespace, "claim", "status"), claim)

    without = Kube(harness.token_kubeconfig(cluster, api, namespace, account))
    try:
        with pytest.raises(ApiError) as refused:
            drop_reservation(without)
    finally:
        without.close()
    assert refused.value.status == 422, refused.value
    assert (
        'changing status.allocation or status.reservedFor requires resource="resourceclaims/binding", '
        in (refused.value.message)
    )
    assert 'verb="update" permission' in refused.value.message
    assert reserved_for(api.get(claims_path(namespace, "claim"))) == [consumer]

    with_binding = Kube(operator_identity("resourceclaim"))
    try:
        updated = drop_reservation(with_binding)
    finally:
        with_binding.close()
    assert reserved_for(updated) == []
