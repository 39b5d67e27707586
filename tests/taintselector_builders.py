"""Builders for the taint-selector tests: API-shaped dicts parsed into the operator's models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.taintselector.models import DeviceClass, DeviceTaintRule, ResourceSlice, TaintSelector

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
SELECTOR_UID = "4f1c2a9e-0000-4000-8000-000000000001"


def dev(name: str, attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A published device; plain Python attribute values become typed DRA attributes."""
    typed: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if isinstance(value, bool):
            typed[key] = {"bool": value}
        elif isinstance(value, int):
            typed[key] = {"int": value}
        else:
            typed[key] = {"string": value}
    return {"name": name, "attributes": typed}


def resource_slice(
    name: str, *devices: dict[str, Any], driver: str = GPU_DRIVER, pool: str = "node-1", generation: int = 1
) -> ResourceSlice:
    return ResourceSlice.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "driver": driver,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                "devices": list(devices),
            },
        }
    )


def device_class(name: str, *expressions: str) -> DeviceClass:
    return DeviceClass.model_validate(
        {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}
    )


def selector(
    *expressions: str,
    name: str = "broken-gpu",
    uid: str = SELECTOR_UID,
    generation: int = 1,
    effect: str = "NoExecute",
    value: str = "Broken",
    status: dict[str, Any] | None = None,
    **selection: Any,
) -> TaintSelector:
    device_selector = dict(selection)
    if expressions:
        device_selector["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return TaintSelector.model_validate(
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceTaintSelector",
            "metadata": {"name": name, "uid": uid, "generation": generation},
            "spec": {
                "taint": {"key": "dra.example.com/unhealthy", "value": value, "effect": effect},
                "deviceSelector": device_selector,
            },
            "status": status or {},
        }
    )


def rule(
    name: str,
    *,
    driver: str = GPU_DRIVER,
    pool: str = "node-1",
    device: str = "gpu-0",
    owner_uid: str | None = SELECTOR_UID,
    effect: str = "NoExecute",
    value: str = "Broken",
    labels: dict[str, str] | None = None,
    generation: int = 1,
    eviction: tuple[str, str, str] | None = None,
    observed_generation: int | None = None,
    deleting: bool = False,
) -> DeviceTaintRule:
    """An existing DeviceTaintRule as read from the API; ``eviction`` is (status, reason, message)."""
    metadata: dict[str, Any] = {"name": name, "generation": generation, "labels": labels or {}}
    if owner_uid is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "dra-operators.io/v1alpha1",
                "kind": "DeviceTaintSelector",
                "name": "broken-gpu",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    if deleting:
        metadata["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    body: dict[str, Any] = {
        "metadata": metadata,
        "spec": {
            "deviceSelector": {"driver": driver, "pool": pool, "device": device},
            "taint": {
                "key": "dra.example.com/unhealthy",
                "value": value,
                "effect": effect,
                "timeAdded": "2026-03-01T12:00:00Z",
            },
        },
    }
    if eviction is not None:
        status, reason, message = eviction
        condition: dict[str, Any] = {"type": "EvictionInProgress", "status": status, "reason": reason}
        condition["message"] = message
        condition["observedGeneration"] = generation if observed_generation is None else observed_generation
        body["status"] = {"conditions": [condition]}
    return DeviceTaintRule.model_validate(body)
