"""What the tests of pods on the real node share (e2e/test_realnode.py, e2e/test_deployed.py):
the DeviceClass of the test driver's GPUs, a template, a pod that uses it, and reading back what
the operators, the scheduler and the kubelet made of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e import harness
from e2e.cluster import images, realnode
from e2e.kube import Kube, wait_for

RESOURCE = "/apis/resource.k8s.io/v1"
DEVICE_CLASS = "real-node-gpu"


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


def create_noexecute_rule(api: Kube, name: str, device: str) -> None:
    """A DeviceTaintRule that taints one of the test driver's devices NoExecute."""
    api.create(
        f"{RESOURCE}/devicetaintrules",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
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


def create_gpu_class(api: Kube) -> str:
    api.create(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{realnode.DRIVER_NAME}"'}}]},
        },
    )
    return DEVICE_CLASS


def eviction_condition(rule: dict[str, Any] | None) -> dict[str, Any]:
    for condition in (rule or {}).get("status", {}).get("conditions") or []:
        if condition.get("type") == "EvictionInProgress":
            return dict(condition)
    return {}
