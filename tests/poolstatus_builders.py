"""Builders for pool-status unit tests: API-shaped dicts in, parsed models out.

The builders produce the JSON the API server would send and validate it through the
models, so every test also exercises the projections. Defaults follow the fixture
conventions of spec section 19: driver ``gpu.example.com``, pool ``pool-1``, one slice
at generation 1 announcing as many slices as the test provides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from operators.poolstatus.models import DeviceTaintRule, RequestSpec, ResourceClaim, ResourceSlice
from operators.poolstatus.status import Completed, compute_pools, decide

D = "gpu.example.com"
NET = "net.example.com"
A = "gpu.example.com/profile"
WRITTEN_AT = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)

REQUEST_RESOURCES = ("resourcepoolstatusrequests", "resourcepoolstatusrequests/status")
"""The request kind and its status subresource, as discovery lists them."""


def served_doc(*names: str) -> dict[str, Any]:
    """A discovery document of an API group version serving the resources ``names``."""
    return {"resources": [{"name": n, "kind": "X", "namespaced": False} for n in names]}


def requests_served_on_both_surfaces() -> dict[str, dict[str, Any]]:
    """Discovery by path: the request kind served both built in (v1alpha3) and by the project CRD."""
    return {
        "/apis/resource.k8s.io/v1alpha3": served_doc(*REQUEST_RESOURCES),
        "/apis/dra-operators.io/v1alpha1": served_doc(*REQUEST_RESOURCES),
    }


Consumption = tuple[str, Mapping[str, str]] | tuple[str, Mapping[str, str], Sequence[str]]
"""(counter set, {counter: quantity}) or the same with compatibility groups."""


def device(
    name: str,
    *,
    attributes: Mapping[str, str | int] | None = None,
    consumes: Sequence[Consumption] = (),
    taints: Sequence[str] = (),
    shareable: bool = False,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if attributes:
        body["attributes"] = {key: _attribute(value) for key, value in attributes.items()}
    if consumes:
        body["consumesCounters"] = [_consumption(entry) for entry in consumes]
    if taints:
        body["taints"] = [{"key": "example.com/bad", "effect": effect} for effect in taints]
    if shareable:
        body["allowMultipleAllocations"] = True
    if capacity:
        body["capacity"] = {key: {"value": value} for key, value in capacity.items()}
    return body


def _attribute(value: str | int) -> dict[str, Any]:
    return {"string": value} if isinstance(value, str) else {"int": value}


def _consumption(entry: Consumption) -> dict[str, Any]:
    consumption: dict[str, Any] = {
        "counterSet": entry[0],
        "counters": {name: {"value": value} for name, value in entry[1].items()},
    }
    if len(entry) == 3:
        consumption["compatibilityGroups"] = list(entry[2])
    return consumption


def plain_devices(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [device(f"device-{i}") for i in range(start, start + count)]


def resource_slice(
    name: str,
    devices: Sequence[Mapping[str, Any]] = (),
    *,
    pool: str = "pool-1",
    driver: str = D,
    generation: int = 1,
    slice_count: int = 1,
    node_name: str | None = None,
    all_nodes: bool = False,
    partition_attribute: str | None = None,
    shared_counters: Mapping[str, Mapping[str, str]] | None = None,
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slice_count},
        "devices": list(devices),
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    if all_nodes:
        spec["allNodes"] = True
    if partition_attribute is not None:
        spec["partitionTypeAttribute"] = partition_attribute
    if shared_counters is not None:
        spec["sharedCounters"] = [
            {"name": set_name, "counters": {c: {"value": v} for c, v in counters.items()}}
            for set_name, counters in shared_counters.items()
        ]
    return ResourceSlice.model_validate({"metadata": {"name": name}, "spec": spec})


def result(
    device_name: str,
    *,
    pool: str = "pool-1",
    driver: str = D,
    admin: bool = False,
    consumed: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"request": "req", "driver": driver, "pool": pool, "device": device_name}
    if admin:
        body["adminAccess"] = True
    if consumed is not None:
        body["consumedCapacity"] = dict(consumed)
    return body


def claim(name: str, *results: Mapping[str, Any], namespace: str = "default") -> ResourceClaim:
    return ResourceClaim.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "status": {"allocation": {"devices": {"results": list(results)}}},
        }
    )


def claims_on(*device_names: str, pool: str = "pool-1", driver: str = D) -> list[ResourceClaim]:
    """One claim per device name, as in "claim on X"."""
    return [
        claim(f"claim-{i}", result(name, pool=pool, driver=driver)) for i, name in enumerate(device_names)
    ]


def taint_rule(name: str, effect: str, selector: Mapping[str, str] | None) -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": {"key": "example.com/bad", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = dict(selector)
    return DeviceTaintRule.model_validate({"metadata": {"name": name}, "spec": spec})


def request_spec(
    driver: str = D,
    *,
    pool_name: str | None = None,
    limit: int | None = None,
    default_attribute: str | None = None,
) -> RequestSpec:
    body: dict[str, Any] = {"driver": driver}
    if pool_name is not None:
        body["poolName"] = pool_name
    if limit is not None:
        body["limit"] = limit
    if default_attribute is not None:
        body["defaultPartitionTypeAttribute"] = default_attribute
    return RequestSpec.model_validate(body)


def final_status(
    spec: RequestSpec,
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim] = (),
    rules: Iterable[DeviceTaintRule] = (),
) -> dict[str, Any]:
    """The status written once the grace period is over."""
    pools = compute_pools(spec, slices, claims, rules)
    outcome = decide(spec, pools, now=100.0, first_seen=0.0, written_at=WRITTEN_AT)
    assert isinstance(outcome, Completed)
    return outcome.status


def only_pool(
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim] = (),
    rules: Iterable[DeviceTaintRule] = (),
    *,
    spec: RequestSpec | None = None,
) -> dict[str, Any]:
    """The single pool entry of the final status."""
    status = final_status(spec or request_spec(), slices, claims, rules)
    assert status["poolCount"] == 1
    pools: list[dict[str, Any]] = status["pools"]
    assert len(pools) == 1
    return pools[0]


def counts(pool: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(total, allocated, available, unavailable)."""
    return (
        pool["totalDevices"],
        pool["allocatedDevices"],
        pool["availableDevices"],
        pool["unavailableDevices"],
    )


def partitions(pool: Mapping[str, Any]) -> list[tuple[str, str, int, int]]:
    return [(e["attribute"], e["type"], e["total"], e["allocatable"]) for e in pool["partitionSummary"]]


def fixture_g_slices(
    *,
    devices: Sequence[Mapping[str, Any]] | None = None,
    counters: str = "80Gi",
    partition_attribute: str | None = A,
) -> list[ResourceSlice]:
    """Fixture G: one counters slice and one device slice with full-0, half-0, half-1."""
    if devices is None:
        devices = [
            device("full-0", attributes={"profile": "Full"}, consumes=[("gpu-0", {"memory": "80Gi"})]),
            device("half-0", attributes={"profile": "Half"}, consumes=[("gpu-0", {"memory": "40Gi"})]),
            device("half-1", attributes={"profile": "Half"}, consumes=[("gpu-0", {"memory": "40Gi"})]),
        ]
    return [
        resource_slice("pool-1-counters", slice_count=2, shared_counters={"gpu-0": {"memory": counters}}),
        resource_slice("pool-1-devices", devices, slice_count=2, partition_attribute=partition_attribute),
    ]


@dataclass
class Scenario:
    """One request and cache snapshot, drawn from vectors 24-69."""

    spec: RequestSpec
    slices: list[ResourceSlice]
    claims: list[ResourceClaim] = field(default_factory=list)
    rules: list[DeviceTaintRule] = field(default_factory=list)


def _nic(name: str, capacity: dict[str, str]) -> dict[str, object]:
    return device(name, shareable=True, capacity=capacity)


def representative_scenarios() -> dict[str, Scenario]:
    gpu0 = ("gpu-0", {"memory": "40Gi"})
    mig = [device(f"mig-{i}", attributes={"profile": "MIG"}, consumes=[(*gpu0, ["mig"])]) for i in range(2)]
    vgpu = [
        device(f"vgpu-{i}", attributes={"profile": "VGPU"}, consumes=[(*gpu0, ["vgpu"])]) for i in range(2)
    ]
    net_slices = [
        resource_slice(
            f"net-{i}",
            [_nic(f"nic-{i}a", {"bandwidth": "10Gi"}), _nic(f"nic-{i}b", {"bandwidth": "10G"})],
            driver=NET,
            slice_count=2,
        )
        for i in range(2)
    ]
    net_claims = [
        claim("c1", result("nic-0a", driver=NET, consumed={"bandwidth": "1G"})),
        claim("c2", result("nic-0a", driver=NET, consumed={f"{NET}/bandwidth": "1Gi"})),
        claim("c3", result("nic-1b", driver=NET, consumed={"bandwidth": "10G"})),
        claim("c4", result("nic-0b", driver=NET, consumed={"bandwidth": "2Gi"}), namespace="other"),
    ]
    return {
        "fixture-g-half-in-use": Scenario(request_spec(), fixture_g_slices(), claims_on("half-0")),
        "compat-groups": Scenario(
            request_spec(),
            [
                resource_slice("counters", slice_count=2, shared_counters={"gpu-0": {"memory": "80Gi"}}),
                resource_slice("devices", [*mig, *vgpu], slice_count=2, partition_attribute=A),
            ],
            claims_on("mig-1"),
        ),
        "taints-and-rules": Scenario(
            request_spec(),
            [
                resource_slice(
                    "s0", [device(f"device-{i}", taints=["NoSchedule"] if i % 3 else []) for i in range(6)]
                )
            ],
            claims_on("device-1", "device-4", "device-9"),
            [
                taint_rule("r1", "NoExecute", {"device": "device-0"}),
                taint_rule("r2", "NoSchedule", {"pool": "pool-1", "device": "device-3"}),
                taint_rule("r3", "None", {}),
            ],
        ),
        "shareable-mixed-formats": Scenario(request_spec(NET), net_slices, net_claims),
        "several-pools": Scenario(
            request_spec(limit=2),
            [
                resource_slice(
                    f"p{i}-s{j}", [device(f"d{i}{j}")], pool=f"pool-{i}", slice_count=2 if i else 3
                )
                for i in range(3)
                for j in range(2)
            ],
        ),
    }
