"""Builders for the device-health tests: API-shaped dicts, and the same parsed into the operator's models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from strategies import pod_consumer

from operators.core.conditions import format_time
from operators.core.discovery import ServedResource
from operators.core.plan import Plan, RecordEvent, Together, Write
from operators.devicehealth.models import AllocatedClaim, DeviceTaintRule, HealthPolicy, Pod, ResourceSlice
from operators.devicehealth.rules import TAINT_KEY, TAINT_VALUE
from operators.dra import taintrules
from operators.dra.pools import DeviceId

GPU = "gpu.example.com"
HEALTH_KEY = "gpu.example.com/health"
POLICY_UID = "7d3b2a10-0000-4000-8000-000000000001"
T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
RULES_API = ServedResource("resource.k8s.io", "v1", "devicetaintrules", False, kind="DeviceTaintRule")


def at(seconds: float) -> datetime:
    from datetime import timedelta

    return T0 + timedelta(seconds=seconds)


def policy_body(
    *,
    name: str = "gpu-health",
    uid: str = POLICY_UID,
    generation: int = 1,
    scope: dict[str, Any] | None = None,
    signals: dict[str, Any] | None = None,
    after: str = "60s",
    action: dict[str, Any] | None = None,
    max_unavailable: Any = 1,
    evictions_per_minute: int | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "scope": scope if scope is not None else {"driver": GPU},
        "signals": signals
        if signals is not None
        else {
            "sliceTaint": {"key": HEALTH_KEY, "values": ["Unhealthy"]},
            "kubelet": {"health": ["Unhealthy"]},
            "after": after,
        },
        "action": action if action is not None else {"effect": "NoExecute", "clearAfter": "10m"},
        "maxUnavailable": max_unavailable,
    }
    if evictions_per_minute is not None:
        spec["evictionsPerMinute"] = evictions_per_minute
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceHealthPolicy",
        "metadata": {"name": name, "uid": uid, "generation": generation},
        "spec": spec,
        "status": status or {},
    }


def policy(**kwargs: Any) -> HealthPolicy:
    return HealthPolicy.model_validate(policy_body(**kwargs))


def device(
    name: str,
    *,
    unhealthy_since: datetime | None = None,
    value: str = "Unhealthy",
    effect: str = "NoSchedule",
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if unhealthy_since is not None:
        body["taints"] = [
            {"key": HEALTH_KEY, "value": value, "effect": effect, "timeAdded": format_time(unhealthy_since)}
        ]
    return body


def slice_body(pool: str, *devices: dict[str, Any], driver: str = GPU, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pool}-{driver}", "uid": f"uid-{pool}-{driver}"},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": list(devices),
        },
    }


def resource_slice(pool: str, *devices: dict[str, Any], driver: str = GPU) -> ResourceSlice:
    return ResourceSlice.model_validate(slice_body(pool, *devices, driver=driver))


def claim_body(
    name: str,
    *results: tuple[str, str, str],
    namespace: str = "team-a",
    pods: tuple[str, ...] = (),
    tolerate: bool = False,
) -> dict[str, Any]:
    """``results`` are (request, pool, device) of the GPU driver; ``pods`` the pods it is reserved for."""
    entries = []
    for request, pool, dev in results:
        entry: dict[str, Any] = {"request": request, "driver": GPU, "pool": pool, "device": dev}
        if tolerate:
            entry["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists"}]
        entries.append(entry)
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "status": {
            "allocation": {"devices": {"results": entries}},
            "reservedFor": [pod_consumer(pod, f"uid-{pod}") for pod in pods],
        },
    }


def claim(name: str, *results: tuple[str, str, str], **kwargs: Any) -> AllocatedClaim:
    return AllocatedClaim.model_validate(claim_body(name, *results, **kwargs))


def pod_body(
    name: str,
    reports: dict[str, list[tuple[str, str]]],
    *,
    claims: dict[str, str] | None = None,
    namespace: str = "team-a",
    phase: str = "Running",
) -> dict[str, Any]:
    """``reports``: resource status name (``claim:<ref>[/<request>]``) -> (resourceID, health);
    ``claims``: pod claim name -> ResourceClaim name."""
    claims = claims or {}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": ref, "resourceClaimTemplateName": "t"} for ref in claims]},
        "status": {
            "phase": phase,
            "resourceClaimStatuses": [
                {"name": ref, "resourceClaimName": real} for ref, real in claims.items()
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "allocatedResourcesStatus": [
                        {
                            "name": status,
                            "resources": [{"resourceID": rid, "health": health} for rid, health in entries],
                        }
                        for status, entries in reports.items()
                    ],
                }
            ],
        },
    }


def pod(name: str, reports: dict[str, list[tuple[str, str]]], **kwargs: Any) -> Pod:
    return Pod.model_validate(pod_body(name, reports, **kwargs))


def rule_body(
    dev: DeviceId,
    *,
    policy_name: str = "gpu-health",
    uid: str = POLICY_UID,
    effect: str = "NoExecute",
    time_added: datetime | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    name = taintrules.owned_rule_name(policy_name, dev)
    taint: dict[str, Any] = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": effect}
    if time_added is not None:
        taint["timeAdded"] = format_time(time_added)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "annotations": annotations
            if annotations is not None
            else {"dra-operators.io/health-policy": policy_name},
            "ownerReferences": [
                {
                    "apiVersion": "dra-operators.io/v1alpha1",
                    "kind": "DeviceHealthPolicy",
                    "name": policy_name,
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "deviceSelector": {"driver": dev.driver, "pool": dev.pool, "device": dev.device},
            "taint": taint,
        },
    }


def rule(dev: DeviceId, **kwargs: Any) -> DeviceTaintRule:
    return DeviceTaintRule.model_validate(rule_body(dev, **kwargs))


def writes(plan: Plan) -> list[Write]:
    """The rule writes of a pass's plan (its one Together step)."""
    return [write for step in plan.steps if isinstance(step, Together) for write in step.writes]


def events(plan: Plan) -> list[RecordEvent]:
    return [step for step in plan.steps if isinstance(step, RecordEvent)]


def gpu(pool: str, name: str) -> DeviceId:
    return DeviceId(GPU, pool, name)
