"""The project CRD (spec section 5): shape, and the structural rules of vectors 83-84.

The CEL transition rules need a real API server (end-to-end suite); here a small
validator applies the schema's structural rules (types, required fields, bounds,
patterns, list limits and map-list keys) to spec and status documents, including the
statuses this operator produces.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from poolstatus_builders import (
    claims_on,
    final_status,
    fixture_g_slices,
    representative_scenarios,
    request_spec,
)

CRD_NAME = "resourcepoolstatusrequests.dra-operators.io"
CRD_PATH = Path(__file__).resolve().parent.parent / "crds" / f"{CRD_NAME}.yaml"


def load_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return crd


def root_schema() -> dict[str, Any]:
    schema: dict[str, Any] = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def schema_errors(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Structural OpenAPI validation, enough for this CRD (no CEL, no formats)."""
    errors: list[str] = []
    if "anyOf" in schema:
        if not any(not schema_errors(option, value, path) for option in schema["anyOf"]):
            errors.append(f"{path}: matches no anyOf option")
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match pattern")
        return errors
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        errors += [f"{path}.{name}: required" for name in schema.get("required", []) if name not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                errors += schema_errors(sub, value[name], f"{path}.{name}")
        unknown = set(value) - set(schema.get("properties", {}))
        if schema.get("properties") and unknown:
            errors.append(f"{path}: unknown fields {sorted(unknown)}")
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        if len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{path}: too many items")
        for index, item in enumerate(value):
            errors += schema_errors(schema["items"], item, f"{path}[{index}]")
        if schema.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value]
            if len(set(keys)) != len(keys):
                errors.append(f"{path}: duplicate map keys")
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: not an integer"]
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            errors.append(f"{path}: out of range")
    elif kind == "string":
        if not isinstance(value, str):
            return [f"{path}: not a string"]
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
            errors.append(f"{path}: bad length")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match pattern")
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: not in enum")
    return errors


def spec_errors(spec: dict[str, Any]) -> list[str]:
    return schema_errors(root_schema()["properties"]["spec"], spec, "spec")


def status_errors(status: dict[str, Any]) -> list[str]:
    return schema_errors(root_schema()["properties"]["status"], status, "status")


def test_manifest_has_no_yaml_anchors() -> None:
    text = CRD_PATH.read_text()
    assert "&quantity" not in text
    assert "*quantity" not in text


def test_identity_and_surface() -> None:
    crd = load_crd()
    assert crd["metadata"]["name"] == CRD_NAME
    assert crd["spec"]["group"] == "dra-operators.io"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["rpsr"]
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]]
    assert columns == [("Driver", 0), ("Pools", 0), ("Status", 0), ("Age", 0), ("Pool", 1)]


def test_immutability_rules() -> None:
    root = root_schema()
    assert {
        "rule": "!has(oldSelf.status) || has(self.status)",
        "message": "status cannot be removed once set",
    } in root["x-kubernetes-validations"]
    for part in ("spec", "status"):
        assert root["properties"][part]["x-kubernetes-validations"] == [
            {"rule": "self == oldSelf", "message": "field is immutable"}
        ]


def test_structural_schema_never_preserves_unknown_fields() -> None:
    assert "x-kubernetes-preserve-unknown-fields" not in CRD_PATH.read_text()


def test_limit_defaults_to_100() -> None:
    assert root_schema()["properties"]["spec"]["properties"]["limit"]["default"] == 100


@pytest.mark.parametrize(
    ("spec", "accepted"),
    [
        ({"driver": ""}, False),
        ({"driver": "invalid driver!"}, False),
        ({"driver": "GPU.Example.com"}, True),
        ({"driver": "d", "poolName": ""}, False),
        ({"driver": "d", "poolName": "invalid pool!"}, False),
        ({"driver": "d", "poolName": "a/b.c"}, True),
        ({"driver": "d", "limit": 0}, False),
        ({"driver": "d", "limit": -1}, False),
        ({"driver": "d", "limit": 1001}, False),
        ({"driver": "d", "limit": 1000}, True),
        ({"driver": "d", "defaultPartitionTypeAttribute": "profile"}, False),
        ({"driver": "d", "defaultPartitionTypeAttribute": "invalid attr!"}, False),
        ({"driver": "d", "defaultPartitionTypeAttribute": "gpu.example.com/profile"}, True),
        ({"driver": "d", "defaultPartitionTypeAttribute": "a.com/b/c"}, False),
        # The domain is a lower-case DNS subdomain, as the built-in API validates it; the name
        # is a C identifier, either case.
        ({"driver": "d", "defaultPartitionTypeAttribute": "Prefix.com/name"}, False),
        ({"driver": "d", "defaultPartitionTypeAttribute": "gpu.Example.com/profile"}, False),
        ({"driver": "d", "defaultPartitionTypeAttribute": "gpu.example.com/Profile_2"}, True),
        ({"driver": "d", "defaultPartitionTypeAttribute": "gpu.example.com/2profile"}, False),
        ({"driver": "d", "defaultPartitionTypeAttribute": "-gpu.example.com/profile"}, False),
        ({}, False),
    ],
)
def test_v83_spec_validation(spec: dict[str, Any], accepted: bool) -> None:
    assert (not spec_errors(spec)) is accepted


def test_v83_attribute_length_rules_are_cel() -> None:
    rules = root_schema()["properties"]["spec"]["properties"]["defaultPartitionTypeAttribute"][
        "x-kubernetes-validations"
    ]
    assert [r["rule"] for r in rules] == [
        "self.indexOf('/') <= 63",
        "self.size() - self.indexOf('/') - 1 <= 32",
    ]


def valid_status() -> dict[str, Any]:
    return final_status(request_spec(), fixture_g_slices(), claims_on("half-0"))


def test_operator_statuses_satisfy_the_schema() -> None:
    assert status_errors(valid_status()) == []


def test_shareable_and_incomplete_statuses_satisfy_the_schema() -> None:
    for scenario in representative_scenarios().values():
        status = final_status(scenario.spec, scenario.slices, scenario.claims, scenario.rules)
        assert status_errors(status) == []


def mutate(path: list[Any], value: Any) -> dict[str, Any]:
    status = valid_status()
    target: Any = status
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return status


_DELETE = object()
PARTITION = {"attribute": "a.com/x", "type": "T", "total": 1, "allocatable": 1}
CAPACITY = {"name": "memory", "total": "1Gi", "consumed": "0", "available": "1Gi"}


def shares(fully: int = 0, partial: int = 0, capacity: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    summary: dict[str, Any] = {"fullyAvailableDevices": fully, "partiallyAvailableDevices": partial}
    if capacity is not None:
        summary["capacity"] = capacity
    return summary


CONDITION = {"type": "Complete", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "x"}


@pytest.mark.parametrize(
    ("path", "value", "accepted"),
    [
        (["pools", 0, "driver"], "", False),
        (["pools", 0, "poolName"], "", False),
        (["pools", 0, "totalDevices"], -1, False),
        (["pools", 0, "resourceSliceCount"], 0, False),
        (["poolCount"], _DELETE, False),
        (["poolCount"], 0, True),
        (["pools", 0, "validationError"], "x" * 257, False),
        (["pools", 0, "validationError"], "é" * 128, True),
        (["pools"], [{"driver": "d", "poolName": "p", "generation": 1}] * 1001, False),
        (["conditions"], [{**CONDITION, "type": f"T{i}"} for i in range(11)], False),
        (["pools", 0, "partitionSummary"], [{**PARTITION, "type": f"T{i}"} for i in range(33)], False),
        (["pools", 0, "partitionSummary"], [{**PARTITION, "type": ""}], False),
        (["pools", 0, "partitionSummary"], [{**PARTITION, "attribute": ""}], False),
        (["pools", 0, "partitionSummary"], [{k: v for k, v in PARTITION.items() if k != "total"}], False),
        (["pools", 0, "partitionSummary"], [PARTITION, PARTITION], False),
        (["pools", 0, "shareableSummary"], {"fullyAvailableDevices": 0}, False),
        (["pools", 0, "shareableSummary"], shares(fully=-1), False),
        (["pools", 0, "shareableSummary"], shares(partial=-1), False),
        (["pools", 0, "shareableSummary"], shares(capacity=[CAPACITY] * 32), True),
        (["pools", 0, "shareableSummary"], shares(capacity=[CAPACITY] * 33), False),
        (["pools", 0, "shareableSummary"], shares(capacity=[{**CAPACITY, "name": ""}]), False),
        (["pools", 0, "shareableSummary"], shares(capacity=[{"name": "m", "total": "1"}]), False),
        (["pools", 0, "shareableSummary"], shares(capacity=[{**CAPACITY, "total": "1K"}]), False),
        (["pools", 0, "generation"], 0, True),
    ],
)
def test_v84g_status_validation(path: list[Any], value: Any, accepted: bool) -> None:
    assert (not status_errors(mutate(path, value))) is accepted


def test_validation_error_byte_limit_is_cel() -> None:
    pool_schema = root_schema()["properties"]["status"]["properties"]["pools"]["items"]
    rules = pool_schema["properties"]["validationError"]["x-kubernetes-validations"]
    assert rules == [{"rule": "bytes(self).size() <= 256", "message": "must be no more than 256 bytes"}]
