"""Fake nodes and ResourceSlices for clusters without kubelets or DRA drivers.

A fake Node is created Ready in one POST (node create accepts status). On clusters where the
node-lifecycle controller runs (kind, existing clusters), a Lease heartbeat keeps it Ready;
the devcluster has that controller off and needs none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from .constants import FAKE_NODE_LABEL


class Api(Protocol):
    def create(self, path: str, body: Mapping[str, Any]) -> Any: ...
    def delete(self, path: str, uid: str | None = None, missing_ok: bool = True, **params: str) -> Any: ...
    def list(self, path: str, **params: str) -> list[dict[str, Any]]: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_body(
    name: str,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    resources = {"pods": "110", "cpu": "8", "memory": "32Gi", **(capacity or {})}
    now = _now()
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                FAKE_NODE_LABEL: "true",
                **(labels or {}),
            },
        },
        "spec": {"taints": list(taints)} if taints else {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "FakeNodeReady",
                    "message": "fake node",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "phase": "Running",
        },
    }
    return body


def create_fake_node(api: Api, name: str, **kwargs: Any) -> dict[str, Any]:
    result: dict[str, Any] = api.create("/api/v1/nodes", node_body(name, **kwargs))
    return result


def delete_fake_node(api: Api, name: str) -> None:
    for rs in api.list("/apis/resource.k8s.io/v1/resourceslices", fieldSelector=f"spec.nodeName={name}"):
        api.delete(f"/apis/resource.k8s.io/v1/resourceslices/{rs['metadata']['name']}")
    api.delete(f"/api/v1/nodes/{name}")


def make_devices(
    count: int,
    attributes: Mapping[str, Any] | None = None,
    capacity: Mapping[str, str] | None = None,
    prefix: str = "dev",
) -> list[dict[str, Any]]:
    devices = []
    for i in range(count):
        attrs: dict[str, Any] = {"index": {"int": i}, "model": {"string": "e2e"}}
        attrs.update({k: dict(v) for k, v in (attributes or {}).items()})
        devices.append(
            {
                "name": f"{prefix}-{i}",
                "attributes": attrs,
                "capacity": {k: {"value": v} for k, v in (capacity or {"memory": "16Gi"}).items()},
            }
        )
    return devices


def slice_name(node: str, driver: str, index: int = 0) -> str:
    digest = hashlib.sha256(driver.encode()).hexdigest()[:8]
    return f"{node}-{digest}-{index}"


def slice_body(
    node: str,
    driver: str,
    devices: Sequence[Mapping[str, Any]],
    pool: str | None = None,
    generation: int = 1,
    resource_slice_count: int = 1,
    name: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or slice_name(node, driver)},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {
                "name": pool or node,
                "generation": generation,
                "resourceSliceCount": resource_slice_count,
            },
            "devices": list(devices),
            **spec,
        },
    }


def create_resource_slice(
    api: Api, node: str, driver: str, devices: Sequence[Mapping[str, Any]], **kwargs: Any
) -> dict[str, Any]:
    result: dict[str, Any] = api.create(
        "/apis/resource.k8s.io/v1/resourceslices", slice_body(node, driver, devices, **kwargs)
    )
    return result


def create_fake_nodes_sync(kubeconfig: str, count: int) -> list[str]:
    from .kube import Kube

    api = Kube(kubeconfig)
    try:
        names = [f"fake-node-{i}" for i in range(count)]
        for name in names:
            create_fake_node(api, name)
        return names
    finally:
        api.close()
