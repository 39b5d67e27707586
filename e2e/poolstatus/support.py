"""Shared pieces of the pool-status e2e tests: the two request surfaces, fixtures' bodies,
allocation through the real scheduler, and reading metrics.

Requests are cluster-scoped, so every test names its requests with ``unique_name`` and
deletes them itself (``RequestTracker``); slices and nodes go through the ``objects`` tracker.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devcluster.constants import PLACEHOLDER_IMAGE, REPO_ROOT
from devcluster.kube import ApiError, Kube, wait_for
from e2e import harness

CRD_NAME = "resourcepoolstatusrequests.dra-operators.io"
CRD_PATH = REPO_ROOT / "crds" / f"{CRD_NAME}.yaml"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


@dataclass(frozen=True)
class Surface:
    api_version: str
    kubectl_resource: str
    """How kubectl names the resource unambiguously."""

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0]

    def path(self, name: str | None = None) -> str:
        base = f"/apis/{self.api_version}/resourcepoolstatusrequests"
        return f"{base}/{name}" if name else base


BUILTIN = Surface("resource.k8s.io/v1alpha3", "resourcepoolstatusrequests.resource.k8s.io")
PROJECT = Surface("dra-operators.io/v1alpha1", "resourcepoolstatusrequests.dra-operators.io")
SURFACES = (BUILTIN, PROJECT)


def install_crd(cluster: harness.Cluster) -> None:
    """Server-side apply of the shipped CRD (left installed: other modules may use it)."""
    cluster.kubectl("apply", "--server-side", "--field-manager=e2e-poolstatus", "-f", str(CRD_PATH))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=30s")


def request_body(surface: Surface, name: str, driver: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": surface.api_version,
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": name},
        "spec": {"driver": driver, **spec},
    }


@dataclass
class RequestTracker:
    """Creates requests and deletes whatever is left of them at teardown."""

    api: Kube
    created: list[str] = field(default_factory=list)

    def create(self, surface: Surface, name: str, driver: str, **spec: Any) -> dict[str, Any]:
        obj: dict[str, Any] = self.api.create(surface.path(), request_body(surface, name, driver, **spec))
        self.created.append(surface.path(name))
        return obj

    def cleanup(self) -> None:
        for path in self.created:
            self.api.delete(path)


def done(api: Kube, surface: Surface, name: str) -> dict[str, Any] | None:
    obj = api.get_or_none(surface.path(name))
    return obj if obj and obj.get("status") else None


def wait_done(api: Kube, surface: Surface, name: str, timeout: float = 30) -> dict[str, Any]:
    result = wait_for(lambda: done(api, surface, name), timeout, f"a status on {surface.group} {name}")
    assert result is not None
    return result


def without_times(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status with every lastTransitionTime removed (the only field allowed to differ)."""
    copy: dict[str, Any] = json.loads(json.dumps(status))
    for condition in copy.get("conditions", []):
        condition.pop("lastTransitionTime", None)
    return copy


def complete(pools: int) -> dict[str, Any]:
    """The Complete condition, without its time, of a request whose status counts ``pools``
    pools (the upstream message says "pools" whatever the count)."""
    return {
        "type": "Complete",
        "status": "True",
        "reason": "CalculationComplete",
        "message": f"Calculated status for {pools} pools",
    }


def condition(obj: Mapping[str, Any]) -> dict[str, Any]:
    conditions = obj["status"]["conditions"]
    assert len(conditions) == 1, conditions
    result: dict[str, Any] = conditions[0]
    return result


# -- slices ------------------------------------------------------------------------------------


def plain_devices(count: int, prefix: str = "device") -> list[dict[str, Any]]:
    return [{"name": f"{prefix}-{i}"} for i in range(count)]


def slice_body(
    name: str,
    driver: str,
    pool: str,
    devices: Sequence[Mapping[str, Any]] = (),
    *,
    node: str | None = None,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            **spec,
        },
    }
    if node:
        body["spec"]["nodeName"] = node
    elif "nodeSelector" not in spec and "perDeviceNodeSelection" not in spec:
        body["spec"]["allNodes"] = True
    if devices:
        body["spec"]["devices"] = [dict(d) for d in devices]
    return body


def partition_device(name: str, profile: str, memory: str, counter_set: str = "gpu-0") -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [{"counterSet": counter_set, "counters": {"memory": {"value": memory}}}],
    }


def partitioned_pool(
    driver: str, node: str, prefix: str, memory: str, partitions: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Pool ``pool-1`` on ``node`` in two slices: one GPU's shared counter of ``memory``, and the
    ``partitions`` (:func:`partition_device`) that draw on it."""
    counters = slice_body(
        f"{prefix}-counters",
        driver,
        "pool-1",
        node=node,
        count=2,
        sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": memory}}}],
    )
    devices = slice_body(
        f"{prefix}-devices",
        driver,
        "pool-1",
        partitions,
        node=node,
        count=2,
        partitionTypeAttribute=f"{driver}/profile",
    )
    return [counters, devices]


def fixture_g(driver: str, node: str, prefix: str) -> list[dict[str, Any]]:
    """Spec fixture G: one GPU of 80Gi published as Full or two Halves, on ``node``."""
    partitions = [
        partition_device("full-0", "Full", "80Gi"),
        partition_device("half-0", "Half", "40Gi"),
        partition_device("half-1", "Half", "40Gi"),
    ]
    return partitioned_pool(driver, node, prefix, "80Gi", partitions)


def nic_slice(driver: str, node: str, name: str, devices: int) -> dict[str, Any]:
    """A pool of shareable NICs with 10Gi of bandwidth each (consumable capacity)."""
    nics = [
        {"name": f"nic-{i}", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10Gi"}}}
        for i in range(devices)
    ]
    return slice_body(name, driver, "nics", nics, node=node)


# -- allocation through the real scheduler -------------------------------------------------------


def claim_body(
    name: str, device_class: str, *, cel: str | None = None, capacity: str | None = None
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    if capacity:
        exactly["capacity"] = {"requests": {"bandwidth": capacity}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": exactly}]}},
    }


def allocate(api: Kube, namespace: str, node: str, claims: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create ``claims`` and one pod using them; the real scheduler allocates them and binds the
    pod to ``node``. Returns the allocated claims."""
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    for claim in claims:
        api.create(base, claim)
    names = [c["metadata"]["name"] for c in claims]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "consumer"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(names)],
            "containers": [
                {
                    "name": "main",
                    "image": PLACEHOLDER_IMAGE,
                    "resources": {"claims": [{"name": f"c{i}"} for i in range(len(names))]},
                }
            ],
        },
    }
    api.create(f"/api/v1/namespaces/{namespace}/pods", pod)

    def allocated() -> list[dict[str, Any]] | None:
        current = [api.get(f"{base}/{n}") for n in names]
        return current if all(c.get("status", {}).get("allocation") for c in current) else None

    result = wait_for(allocated, 60, f"the scheduler to allocate {names}")
    assert result is not None
    return result


def results(claims: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [r for c in claims for r in c["status"]["allocation"]["devices"]["results"]]


# -- metrics ---------------------------------------------------------------------------------------


def metric(text: str, name: str, /, **labels: str) -> float:
    """The value of one sample of ``name`` with exactly these labels (0 when absent)."""
    return harness.metric(text, name, **labels) or 0.0


@contextlib.contextmanager
def tracked_requests(api: Kube) -> Iterator[RequestTracker]:
    tracker = RequestTracker(api)
    try:
        yield tracker
    finally:
        with contextlib.suppress(ApiError):
            tracker.cleanup()
