"""Plain-data builders for the devicetaint tests: fixture F of spec §17, as API-shaped dicts.

Objects go through the same parsing as watch events, so the tests also cover the projections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from strategies import pod_consumer, pod_group_consumer, pod_group_owner, pod_owner

from operators.core.conditions import format_time
from operators.core.keys import POD, Key
from operators.core.models import parse
from operators.devicetaint.cache import ClusterCache, Effects
from operators.devicetaint.models import RULE, DeviceTaintRule, Pod, ResourceClaim, ResourceSlice

T = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DRIVER = "dra.example.com"
KEY = "dra.example.com/unhealthy"
FOREVER = {"key": KEY, "operator": "Exists", "effect": "NoExecute"}


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def taint(
    effect: str = "NoExecute", time_added: datetime | None = T, value: str = "Broken"
) -> dict[str, Any]:
    body: dict[str, Any] = {"key": KEY, "value": value, "effect": effect}
    if time_added is not None:
        body["timeAdded"] = format_time(time_added)
    return body


def tolerating(seconds_: int | None = None, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(FOREVER)
    if seconds_ is not None:
        body["tolerationSeconds"] = seconds_
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


TAINTED = {"gpu-0": [taint()]}
"""A NoExecute taint on the default pool's ``gpu-0``, the device :func:`claim` allocates."""
P1 = Key(POD, "ns1", "p1", "U1")
"""The work key of :func:`pod`'s default pod."""
R1 = Key(RULE, "", "example", "R1")
"""The work key of :func:`rule`'s default rule."""


def resource_slice(
    name: str = "node-1-slice",
    pool: str = "node-1",
    generation: int = 1,
    devices: Sequence[str] = ("gpu-0", "gpu-1", "gpu-2"),
    taints: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    driver: str = DRIVER,
) -> ResourceSlice:
    taints = taints or {}
    body = {
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "driver": driver,
            "nodeName": "node-1",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": d, **({"taints": list(taints[d])} if d in taints else {})} for d in devices],
        },
    }
    return parse(ResourceSlice, body)


def claim(
    name: str = "c1",
    namespace: str = "ns1",
    devices: Sequence[str] = ("gpu-0",),
    tolerations: Sequence[dict[str, Any]] = (),
    reserved_for: Iterable[tuple[str, str]] = (("p1", "U1"),),
    owner_uid: str | None = None,
    allocated: bool = True,
    uid: str | None = None,
    pool: str = "node-1",
    group: str | None = None,
) -> ResourceClaim:
    """``group``: the claim of that PodGroup, reserved for it (instead of ``reserved_for``)."""
    consumers = [pod_consumer(n, u) for n, u in reserved_for]
    if group is not None:
        consumers = [pod_group_consumer(group, "G1")]
    status: dict[str, Any] = {"reservedFor": consumers}
    if allocated:
        results = [
            {
                "request": "req-0",
                "driver": DRIVER,
                "pool": pool,
                "device": d,
                "tolerations": list(tolerations),
            }
            for d in devices
        ]
        status["allocation"] = {"devices": {"results": results}}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if owner_uid is not None:
        metadata["ownerReferences"] = [pod_owner("owner", owner_uid)]
    if group is not None:
        metadata["ownerReferences"] = [pod_group_owner(group, "G1")]
    return parse(ResourceClaim, {"kind": "ResourceClaim", "metadata": metadata, "status": status})


def pod(
    name: str = "p1",
    namespace: str = "ns1",
    uid: str = "U1",
    node: str = "node-1",
    claims: Sequence[dict[str, Any]] = ({"name": "gpu", "resourceClaimName": "c1"},),
    statuses: Sequence[dict[str, Any]] = (),
    extended: str | None = None,
    deleting: bool = False,
    conditions: Sequence[dict[str, Any]] = (),
    group: str | None = None,
) -> Pod:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = format_time(T)
    status: dict[str, Any] = {"resourceClaimStatuses": list(statuses), "conditions": list(conditions)}
    if extended is not None:
        status["extendedResourceClaimStatus"] = {"resourceClaimName": extended, "requestMappings": []}
    body = {
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "resourceClaims": list(claims),
            **({"schedulingGroup": {"podGroupName": group}} if group else {}),
        },
        "status": status,
    }
    return parse(Pod, body)


def rule(
    name: str = "example",
    uid: str = "R1",
    generation: int = 1,
    selector: dict[str, Any] | None = None,
    effect: str = "NoExecute",
    time_added: datetime | None = T,
    conditions: Sequence[dict[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    owners: Sequence[dict[str, Any]] = (),
    value: str = "Broken",
) -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": taint(effect, time_added, value)}
    if selector is not None:
        spec["deviceSelector"] = selector
    metadata: dict[str, Any] = {"name": name, "uid": uid, "generation": generation}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if owners:
        metadata["ownerReferences"] = list(owners)
    body = {
        "kind": "DeviceTaintRule",
        "metadata": metadata,
        "spec": spec,
        "status": {"conditions": list(conditions)},
    }
    return parse(DeviceTaintRule, body)


def fixture_f(
    slice_taints: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    tolerations: Sequence[dict[str, Any]] = (),
    now: datetime = T,
) -> ClusterCache:
    """Fixture F: one slice with three GPUs, claim c1 on gpu-0 reserved for pod p1 (UID U1)."""
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=slice_taints), now)
    state.apply_claim(claim(tolerations=tolerations), now)
    state.apply_pod(pod(), now)
    return state


def enqueued(effects: Effects) -> list[tuple[object, float]]:
    return [(e.item, e.delay) for e in effects.enqueue]


def delays_of(effects: Effects, item: object) -> list[float]:
    return [e.delay for e in effects.enqueue if e.item == item]
