"""Pods that really run: the devcluster's real node (kubelet, containerd, runc, CNI, test driver).

Every other e2e test binds pods to fake nodes, where nothing starts. Here our operators work
together with a real kubelet: the claim our resourceclaim operator generates is allocated by
kube-scheduler, prepared by the test driver's kubelet plugin (a CDI spec injects the device's
name into the container) and unprepared when the container stops.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import images, realnode
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.product.support import (
    RESOURCE,
    allocated_device,
    cdi_specs,
    create_noexecute_rule,
    eviction_condition,
    generated_claim,
    logs,
    phase,
    pod_body,
    template,
)
from e2e.support import ARTIFACTS

pytestmark = [pytest.mark.devcluster_only, pytest.mark.timeout(300)]


@pytest.fixture
def resourceclaim(operator: Callable[..., Any]) -> Iterator[harness.RunningOperator]:
    with operator("resourceclaim") as op:
        yield op


def test_template_pod_runs_and_its_claim_is_unprepared_and_deleted(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    node_gpu_class: str,
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
    node_gpu_class: str,
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


def test_noexecute_rule_evicts_the_running_pod(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    node_gpu_class: str,
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
        create_noexecute_rule(api, rule, device)
        try:
            # The condition may say Completed only once the kubelet has stopped the container
            # and the pod object is gone.
            deadline = time.monotonic() + 90
            gone_at: float | None = None
            while time.monotonic() < deadline:
                condition = eviction_condition(api.get_or_none(f"{rules}/{rule}"))
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


def _resource_health(api: Kube, namespace: str, pod: str, resource_id: str) -> str | None:
    """The health the kubelet reports for ``resource_id`` in the pod's container status."""
    obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}") or {}
    for container in obj.get("status", {}).get("containerStatuses") or []:
        for status in container.get("allocatedResourcesStatus") or []:
            for resource in status.get("resources") or []:
                if resource.get("resourceID") == resource_id:
                    return str(resource.get("health"))
    return None


def _slice_taints(api: Kube) -> dict[str, list[dict[str, Any]]]:
    """The taints of every device of the test driver's slices, by device name."""
    slices = api.list(
        f"{RESOURCE}/resourceslices",
        fieldSelector=f"spec.nodeName={realnode.NODE_NAME},spec.driver={realnode.DRIVER_NAME}",
    )
    return {d["name"]: d.get("taints") or [] for s in slices for d in s["spec"].get("devices") or []}


def test_device_health_reaches_the_pod_status_and_the_slice(
    api: Kube,
    namespace: str,
    node: realnode.NodeLayout,
    node_gpu_class: str,
    resourceclaim: harness.RunningOperator,
) -> None:
    """The test driver reports a device Unhealthy and taints it; the kubelet shows the health in the
    pod's allocatedResourcesStatus and the slice carries the taint, and both go back."""
    api.create(
        f"/api/v1/namespaces/{namespace}/pods", pod_body("patient", template(api, namespace), "sleep 3600")
    )
    claim = generated_claim(api, namespace, "patient")
    device = allocated_device(api, namespace, claim["metadata"]["name"])
    # The kubelet names a device by the first CDI device ID its driver returned for it.
    resource_id = f"{realnode.DRIVER_NAME}/gpu={claim['metadata']['uid']}-{device}"
    wait_for(lambda: phase(api, namespace, "patient") == "Running", 120, "patient to run")
    wait_for(
        lambda: _resource_health(api, namespace, "patient", resource_id) == "Healthy",
        60,
        f"the kubelet to report {device} Healthy before any change",
    )
    assert all(not taints for taints in _slice_taints(api).values())
    taint = {"key": "dra-operators.test/unhealthy", "value": "ecc", "effect": "None"}
    seconds: dict[str, float] = {}

    def observe(health: str, taints: list[dict[str, Any]], written: float, label: str) -> bool:
        """Record the first poll at which the pod status, and the slice, show what was written."""
        status, published = f"{label}_status", f"{label}_slice"
        if status not in seconds and _resource_health(api, namespace, "patient", resource_id) == health:
            seconds[status] = round(time.monotonic() - written, 2)
        current = [{k: t.get(k) for k in ("key", "value", "effect")} for t in _slice_taints(api)[device]]
        if published not in seconds and current == taints:
            seconds[published] = round(time.monotonic() - written, 2)
        return status in seconds and published in seconds

    try:
        written = time.monotonic()
        realnode.set_device_health(node, device, "Unhealthy", taint)
        wait_for(
            lambda: observe("Unhealthy", [taint], written, "unhealthy"),
            60,
            f"{device} Unhealthy in the pod status and tainted in the slice; seen so far {seconds}",
        )
        others = {name: t for name, t in _slice_taints(api).items() if name != device}
        assert all(not t for t in others.values()), f"devices other than {device} got taints: {others}"
        assert api.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim['metadata']['name']}")[
            "status"
        ]["allocation"], "a None taint must leave the allocation alone"
        assert phase(api, namespace, "patient") == "Running", "a None taint must not evict the pod"

        written = time.monotonic()
        realnode.set_device_health(node, device, "Healthy")
        wait_for(
            lambda: observe("Healthy", [], written, "healthy"),
            60,
            f"{device} Healthy in the pod status and untainted in the slice; seen so far {seconds}",
        )
        # The generated claim keeps its delete protection until our operator releases it, and the
        # operator stops before the namespace is removed: the pod and its claim go while it runs.
        api.delete(f"/api/v1/namespaces/{namespace}/pods/patient")
        claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
        wait_for(lambda: api.list(claims) == [], 90, "our operator to delete the generated claim")
    finally:
        realnode.clear_device_health(node)
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "device-health.json").write_text(json.dumps(seconds, indent=2) + "\n")
        print(f"device health, seconds from the control write: {json.dumps(seconds)}")


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


def running(api: Kube, pod: str) -> Callable[[], bool]:
    return lambda: phase(api, "default", pod) == "Running"


@pytest.mark.alone
def test_cluster_down_leaves_nothing_behind(tmp_path: Path, node: realnode.NodeLayout) -> None:
    """``make cluster-down`` of a cluster whose two real nodes each ran a pod: no process, mount,
    network interface, cgroup or iptables rule of either remains."""
    links_before, rules_before = _links(), _iptables()
    directory = tmp_path / "c"
    layouts = {
        realnode.NODE_NAME: realnode.NodeLayout.of(directory),
        realnode.SECOND_NODE_NAME: realnode.NodeLayout.second(directory),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "devcluster", *args, "--dir", str(directory)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    up = cli("up", "--second-node")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = str(directory / "kubeconfig")
        api = Kube(kubeconfig)
        try:
            for index, node_name in enumerate(layouts):
                api.create(
                    "/api/v1/namespaces/default/pods",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"sleeper-{index}"},
                        "spec": {
                            "nodeName": node_name,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": images.BASE_IMAGE,
                                    "imagePullPolicy": "Never",
                                    "command": ["sleep", "3600"],
                                }
                            ],
                        },
                    },
                )
            for index, node_name in enumerate(layouts):
                wait_for(
                    running(api, f"sleeper-{index}"),
                    120,
                    f"a pod to run on {node_name} of another devcluster",
                )
        finally:
            api.close()
        for node_name, layout in layouts.items():
            assert realnode.veths_on(layout.bridge), f"the pod on {node_name} has no veth on its bridge"
            assert layout.mounts(), f"the pod on {node_name} mounted nothing under the node's directories"
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stdout + down.stderr
    for layout in layouts.values():
        assert realnode.leftovers(layout) == []
        assert _own_processes(layout) == []
    assert _links() - links_before == set()
    assert _iptables() == rules_before
