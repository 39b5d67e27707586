"""Pods that really run: the devcluster's real node (kubelet, containerd, runc, CNI, test driver).

Every other e2e test binds pods to fake nodes, where nothing starts. Here our operators work
together with a real kubelet: the claim our resourceclaim operator generates is allocated by
kube-scheduler, prepared by the test driver's kubelet plugin (a CDI spec injects the device's
name into the container) and unprepared when the container stops.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import harness
from e2e.cluster import images, realnode
from e2e.cluster.constants import REPO_ROOT
from e2e.kube import Kube, wait_for

pytestmark = [pytest.mark.devcluster_only, pytest.mark.timeout(300)]

RESOURCE = "/apis/resource.k8s.io/v1"
DEVICE_CLASS = "real-node-gpu"


@pytest.fixture(scope="module")
def node(cluster: harness.Cluster) -> realnode.NodeLayout:
    if cluster.state is None or cluster.state.node is None:
        pytest.skip("the cluster has no real node (NODE=fake)")
    return cluster.state.node_layout


@pytest.fixture(scope="module")
def gpu_class(api: Kube, node: realnode.NodeLayout) -> Iterator[str]:
    path = f"{RESOURCE}/deviceclasses"
    api.create(
        path,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{realnode.DRIVER_NAME}"'}}]},
        },
    )
    yield DEVICE_CLASS
    api.delete(f"{path}/{DEVICE_CLASS}")


def template(api: Kube, namespace: str, name: str = "one-gpu") -> str:
    api.create(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}
                }
            },
        },
    )
    return name


def pod_body(name: str, template_name: str, script: str, restart: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {realnode.REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": realnode.REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "containers": [
                {
                    "name": "main",
                    "image": images.BASE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def generated_claim(api: Kube, namespace: str, pod: str) -> dict[str, Any]:
    """The claim our operator generated for ``pod``, once the pod status names it."""

    def claim() -> dict[str, Any] | None:
        obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        statuses = (obj or {}).get("status", {}).get("resourceClaimStatuses") or []
        names = [s.get("resourceClaimName") for s in statuses if s.get("resourceClaimName")]
        if not names:
            return None
        found: dict[str, Any] | None = api.get_or_none(
            f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{names[0]}"
        )
        return found

    found = wait_for(claim, 60, f"the generated claim of {pod}")
    assert found is not None
    return found


def allocated_device(api: Kube, namespace: str, claim: str) -> str:
    def device() -> str | None:
        obj = api.get_or_none(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim}")
        results = ((obj or {}).get("status", {}).get("allocation") or {}).get("devices", {}).get(
            "results"
        ) or []
        return str(results[0]["device"]) if results else None

    found = wait_for(device, 60, f"claim {claim} to be allocated")
    assert found is not None
    return found


def phase(api: Kube, namespace: str, pod: str) -> str | None:
    obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    return None if obj is None else str(obj.get("status", {}).get("phase"))


def cdi_specs(node: realnode.NodeLayout) -> list[Path]:
    return sorted(node.cdi_dir.glob("*.json"))


def logs(cluster: harness.Cluster, namespace: str, pod: str) -> str:
    return cluster.kubectl("logs", "-n", namespace, pod).stdout


@pytest.fixture
def resourceclaim(operator: Callable[..., Any]) -> Iterator[harness.RunningOperator]:
    with operator("resourceclaim") as op:
        yield op


def test_template_pod_runs_and_its_claim_is_unprepared_and_deleted(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    gpu_class: str,
    resourceclaim: harness.RunningOperator,
) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(
        pods, pod_body("trainer", template(api, namespace), 'echo "GPU_DEVICE_0=$GPU_DEVICE_0"; sleep 3600')
    )
    claim = generated_claim(api, namespace, "trainer")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "trainer"
    device = allocated_device(api, namespace, claim["metadata"]["name"])
    wait_for(lambda: phase(api, namespace, "trainer") == "Running", 120, "trainer to run on the real node")
    assert api.get(f"{pods}/trainer")["spec"]["nodeName"] == realnode.NODE_NAME
    wait_for(
        lambda: f"GPU_DEVICE_0={device}" in logs(cluster, namespace, "trainer"),
        30,
        f"the container to print the prepared device {device}",
    )
    uid = claim["metadata"]["uid"]
    assert any(uid in spec.name for spec in cdi_specs(node)), "the driver wrote no CDI spec for the claim"

    api.delete(f"{pods}/trainer")
    wait_for(lambda: api.get_or_none(f"{pods}/trainer") is None, 60, "the kubelet to stop the container")
    wait_for(lambda: not any(uid in s.name for s in cdi_specs(node)), 60, "the driver to unprepare the claim")
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    wait_for(lambda: api.list(claims) == [], 60, "our operator to delete the generated claim")


def test_finished_pod_succeeds_and_releases_its_claim(
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    gpu_class: str,
    resourceclaim: harness.RunningOperator,
) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(pods, pod_body("job", template(api, namespace), 'test -n "$GPU_DEVICE_0"', restart="Never"))
    claim = generated_claim(api, namespace, "job")
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim['metadata']['name']}"
    wait_for(
        lambda: phase(api, namespace, "job") == "Succeeded", 120, "the pod to succeed through the kubelet"
    )
    wait_for(lambda: api.get_or_none(path) is None, 60, "the finished pod's generated claim to be deleted")
    assert phase(api, namespace, "job") == "Succeeded"


def _condition(rule: dict[str, Any] | None) -> dict[str, Any]:
    for condition in (rule or {}).get("status", {}).get("conditions") or []:
        if condition.get("type") == "EvictionInProgress":
            return dict(condition)
    return {}


def test_noexecute_rule_evicts_the_running_pod(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    gpu_class: str,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    rules = f"{RESOURCE}/devicetaintrules"
    with operator("resourceclaim"), operator("devicetaint"):
        api.create(pods, pod_body("victim", template(api, namespace), "sleep 3600"))
        claim = generated_claim(api, namespace, "victim")
        device = allocated_device(api, namespace, claim["metadata"]["name"])
        wait_for(lambda: phase(api, namespace, "victim") == "Running", 120, "victim to run")
        victim_uid = api.get(f"{pods}/victim")["metadata"]["uid"]
        rule = unique_name("evict")
        api.create(
            rules,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": rule},
                "spec": {
                    "deviceSelector": {
                        "driver": realnode.DRIVER_NAME,
                        "pool": realnode.NODE_NAME,
                        "device": device,
                    },
                    "taint": {"key": "dra-operators.test/broken", "value": "true", "effect": "NoExecute"},
                },
            },
        )
        try:
            # The condition may say Completed only once the kubelet has stopped the container
            # and the pod object is gone.
            deadline = time.monotonic() + 90
            gone_at: float | None = None
            while time.monotonic() < deadline:
                condition = _condition(api.get_or_none(f"{rules}/{rule}"))
                pod = api.get_or_none(f"{pods}/victim")
                present = pod is not None and pod["metadata"]["uid"] == victim_uid
                if condition.get("reason") == "Completed":
                    assert not present, f"Completed while the pod still exists: {condition}"
                    break
                if not present and gone_at is None:
                    gone_at = time.monotonic()
                time.sleep(0.2)
            else:
                raise AssertionError(f"no Completed condition within 90 s: {condition}")
            assert condition["status"] == "False"
            assert condition["message"] == "1 pod evicted since starting the controller."
            assert gone_at is not None, "the pod went and Completed came in the same poll"
        finally:
            api.delete(f"{rules}/{rule}")


def _own_processes(node: realnode.NodeLayout) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(node.state_dir) in cmdline or str(node.run) in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=30).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _iptables() -> str:
    out = subprocess.run(["iptables-save"], capture_output=True, text=True, timeout=30).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith(("#", ":")) or "CNI" in line)


def test_cluster_down_leaves_nothing_behind(tmp_path: Path, node: realnode.NodeLayout) -> None:
    """``make cluster-down`` of a cluster whose real node ran a pod: no process, mount, network
    interface, cgroup or iptables rule of it remains."""
    links_before, rules_before = _links(), _iptables()
    directory = tmp_path / "c"
    layout = realnode.NodeLayout.of(directory)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "e2e.cluster", *args, "--dir", str(directory)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    up = cli("up")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = str(directory / "kubeconfig")
        api = Kube(kubeconfig)
        try:
            api.create(
                "/api/v1/namespaces/default/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "sleeper"},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": images.BASE_IMAGE,
                                "imagePullPolicy": "Never",
                                "command": ["sleep", "3600"],
                            }
                        ]
                    },
                },
            )
            wait_for(
                lambda: phase(api, "default", "sleeper") == "Running",
                120,
                "a pod to run on the second real node",
            )
        finally:
            api.close()
        assert realnode.veths_on(layout.bridge), "the running pod has no veth on the node's bridge"
        assert layout.mounts(), "the running pod mounted nothing under the node's directories"
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert realnode.leftovers(layout) == []
    assert _own_processes(layout) == []
    assert _links() - links_before == set()
    assert _iptables() == rules_before
