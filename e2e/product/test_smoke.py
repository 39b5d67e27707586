"""Smoke test of the e2e environment (devcluster spec, section 8). It runs first; if it fails
the run stops, because nothing after it could pass."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.constants import (
    DELETE_PROTECTION_FINALIZER,
    FEATURE_GATES,
    WORKLOAD_CLAIMS_FEATURE_GATES,
)
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.resourceclaim.support import (
    claim_body,
    create_claim,
    create_pod,
    create_template,
    named_entry,
    pod_body,
    template_body,
    template_entry,
)
from e2e.support import Tracker

pytestmark = [pytest.mark.smoke, pytest.mark.timeout(90)]

DRA_RESOURCES = {
    "deviceclasses",
    "resourceclaims",
    "resourceclaimtemplates",
    "resourceslices",
    "devicetaintrules",
    "resourcepoolstatusrequests",
}


@pytest.fixture(autouse=True)
def _stop_on_failure(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[None]:
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        tails = "\n".join(
            f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:])
            for name, path in cluster.logs.items()
            if path.exists()
        )
        pytest.exit(f"smoke test {request.node.name} failed; stopping the e2e run.\n{tails}", returncode=1)


def test_versions(cluster: harness.Cluster) -> None:
    """S1: server and client are v1.37.2 (minor 37 on other backends)."""
    doc = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    if cluster.backend == "devcluster":
        assert doc["clientVersion"]["gitVersion"] == "v1.37.2"
        assert doc["serverVersion"]["gitVersion"] == "v1.37.2"
    else:
        assert doc["serverVersion"]["minor"].rstrip("+") == "37"


def test_dra_apis_served(cluster: harness.Cluster, api: Kube) -> None:
    """S2: every DRA resource and API version is served."""
    names = set(cluster.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split())
    assert {f"{r}.resource.k8s.io" for r in DRA_RESOURCES} <= names
    versions = set(cluster.kubectl("api-versions").stdout.split())
    assert {f"resource.k8s.io/{v}" for v in ("v1", "v1beta1", "v1beta2", "v1alpha3")} <= versions
    alpha = {r["name"] for r in api.get("/apis/resource.k8s.io/v1alpha3")["resources"]}
    assert {"devicetaintrules", "resourcepoolstatusrequests"} <= alpha


def _enabled_gates(cluster: harness.Cluster, gates: Iterable[str]) -> dict[str, bool]:
    lines = cluster.kubectl("get", "--raw", "/metrics").stdout.splitlines()
    return {
        gate: any(
            line.startswith(f'kubernetes_feature_enabled{{name="{gate}"') and line.endswith(" 1")
            for line in lines
        )
        for gate in gates
    }


def test_feature_gates_enabled(cluster: harness.Cluster) -> None:
    """S3: the apiserver reports each gate of the devcluster as enabled."""
    enabled = _enabled_gates(cluster, FEATURE_GATES)
    assert all(enabled.values()), f"not enabled: {[g for g, on in enabled.items() if not on]}"


@pytest.mark.workload_claims
def test_podgroup_api_served(cluster: harness.Cluster, api: Kube) -> None:
    """S2 and S3 with the workload claims option: its gates are on and PodGroups, with their
    status, are served in the version every 1.37 client of them uses."""
    enabled = _enabled_gates(cluster, WORKLOAD_CLAIMS_FEATURE_GATES)
    assert all(enabled.values()), f"not enabled: {[g for g, on in enabled.items() if not on]}"
    served = {r["name"] for r in api.get("/apis/scheduling.k8s.io/v1beta1")["resources"]}
    assert {"podgroups", "podgroups/status"} <= served


def test_real_allocation_and_binding(
    api: Kube,
    namespace: str,
    unique_name: Callable[[str], str],
    driver_name: str,
    objects: Tracker,
) -> None:
    """S4 and S5: the real scheduler allocates a pre-created claim and binds its pod; a forced
    delete removes the bound pod."""
    node, cls = unique_name("node"), unique_name("class")
    objects.fake_pool(node, cls, driver_name, 2)
    claim_path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    create_claim(api, namespace, claim_body("claim", device_class=cls))
    pod = create_pod(api, namespace, pod_body("pod", [named_entry("dev", "claim")], scheduled=True))

    def bound() -> dict[str, Any] | None:
        current: dict[str, Any] = api.get(f"/api/v1/namespaces/{namespace}/pods/pod")
        conditions = {c["type"]: c["status"] for c in current.get("status", {}).get("conditions", [])}
        return (
            current
            if current["spec"].get("nodeName") == node and conditions.get("PodScheduled") == "True"
            else None
        )

    wait_for(bound, 30, "the pod to be bound to the fake node")
    claim = api.get(f"{claim_path}/claim")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1
    assert results[0]["driver"] == driver_name
    assert results[0]["pool"] == node
    assert results[0]["device"] in {"dev-0", "dev-1"}
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert DELETE_PROTECTION_FINALIZER in claim["metadata"]["finalizers"]

    api.delete(f"/api/v1/namespaces/{namespace}/pods/pod", gracePeriodSeconds="0")
    wait_for(lambda: api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/pod") is None, 10, "the pod to go")


def _template_pod(api: Kube, namespace: str, cls: str) -> None:
    create_template(api, namespace, template_body("tmpl", device_class=cls))
    create_pod(api, namespace, pod_body("tmpl-pod", [template_entry("dev", "tmpl")], scheduled=True))


def test_in_tree_resourceclaim_controller_is_off(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    unique_name: Callable[[str], str],
    driver_name: str,
    device_class: Callable[..., Any],
) -> None:
    """S6: without our operator, nobody creates claims from templates."""
    if cluster.mode != "default":
        pytest.skip("the cluster runs the in-tree DRA controllers")
    cls = unique_name("class")
    device_class(cls, driver_name)
    _template_pod(api, namespace, cls)
    with pytest.raises(AssertionError):
        wait_for(
            lambda: api.list(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"),
            10,
            "a generated claim",
        )
    pod = api.get(f"/api/v1/namespaces/{namespace}/pods/tmpl-pod")
    assert not pod["spec"].get("nodeName")


def test_garbage_collector(api: Kube, namespace: str) -> None:
    """S7: owner references are honoured (the operators rely on them)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = api.create(path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
    api.create(
        path,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "child",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
        },
    )
    api.delete(f"{path}/owner")
    wait_for(lambda: api.get_or_none(f"{path}/child") is None, 30, "the owned ConfigMap to be collected")


def test_restricted_identity(cluster: harness.Cluster, api: Kube, namespace: str) -> None:
    """S8: a TokenRequest token authenticates as its ServiceAccount, and RBAC denies what it lacks."""
    api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "smoke"}},
    )
    kubeconfig = harness.token_kubeconfig(cluster, api, namespace, "smoke")
    who = json.loads(cluster.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout)
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:smoke"
    denied = cluster.kubectl("get", "secrets", "-n", namespace, kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr


def test_listeners_on_loopback(cluster: harness.Cluster) -> None:
    """S9: every TCP socket a devcluster process listens on is bound to 127.0.0.1, except the real
    node's kubelet, which listens on the node IP: its own bridge's address on this machine."""
    if cluster.backend != "devcluster" or cluster.state is None:
        pytest.skip("only the devcluster's processes can be inspected")
    inodes: set[str] = set()
    for comp in cluster.state.components.values():
        fd_dir = Path(f"/proc/{comp.pid}/fd")
        for fd in fd_dir.iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                listening.append(fields[1])
    assert listening, "no listening sockets found"
    allowed = {"0100007F"}  # /proc/net/tcp writes IPv4 addresses as little-endian hex
    if cluster.state.node is not None:
        allowed.add(socket.inet_aton(cluster.state.node_layout.node_ip)[::-1].hex().upper())
    assert all(addr.split(":")[0] in allowed for addr in listening), listening
