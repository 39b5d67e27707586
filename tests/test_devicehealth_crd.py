"""The DeviceHealthPolicy CRD: the names, columns and defaults users rely on, and agreement with
the models (a policy admitted with the CRD's defaults reads as the same spec)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from crd_support import CRDS, check_identity, crd, spec_schema, version

from operators.devicehealth.models import API_VERSION, KIND, PLURAL, HealthPolicySpec
from operators.devicehealth.status import (
    STATE_CONFLICT,
    STATE_HELD_BACK,
    STATE_SIGNALLED,
    STATE_TAINTED,
    STATE_WOULD_TAINT,
)
from operators.devicehealth.validation import ValidSpec, check_spec


def test_identity() -> None:
    check_identity(PLURAL, KIND, API_VERSION)


def test_status_subresource_and_printer_columns() -> None:
    assert version(PLURAL)["subresources"] == {"status": {}}
    columns = {column["name"]: column["jsonPath"] for column in version(PLURAL)["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Active"] == '.status.conditions[?(@.type=="Active")].status'
    assert columns["Held"] == ".status.heldBackDevices"


def test_the_scope_is_a_device_taint_selectors_device_selector() -> None:
    selectors = crd("devicetaintselectors")
    (taint_version,) = selectors["spec"]["versions"]
    device_selector = taint_version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "deviceSelector"
    ]
    scope = spec_schema(PLURAL)["properties"]["scope"]
    assert scope["properties"] == device_selector["properties"]
    assert scope["x-kubernetes-validations"] == device_selector["x-kubernetes-validations"]


def test_the_crds_defaults_are_the_models() -> None:
    props = spec_schema(PLURAL)["properties"]
    signals = props["signals"]["properties"]
    action = props["action"]["properties"]
    model = HealthPolicySpec.model_validate({"signals": {"kubelet": {}}})
    assert signals["after"]["default"] == model.signals.after
    assert signals["kubelet"]["properties"]["health"]["default"] == list(model.signals.kubelet.health)  # type: ignore[union-attr]
    assert action["effect"]["default"] == model.action.effect
    assert action["clearAfter"]["default"] == model.action.clear_after
    assert props["maxUnavailable"]["default"] == model.max_unavailable
    assert isinstance(check_spec(model), ValidSpec)


def test_the_duration_patterns_admit_what_the_operator_reads() -> None:
    after = re.compile(spec_schema(PLURAL)["properties"]["signals"]["properties"]["after"]["pattern"])
    clear = re.compile(spec_schema(PLURAL)["properties"]["action"]["properties"]["clearAfter"]["pattern"])
    for good in ("60s", "1m30s", "1.5h", "500ms"):
        assert after.fullmatch(good)
        assert clear.fullmatch(good)
        body = {"signals": {"kubelet": {}, "after": good}, "action": {"clearAfter": good}}
        assert isinstance(check_spec(HealthPolicySpec.model_validate(body)), ValidSpec)
    assert clear.fullmatch("Never")
    assert not after.fullmatch("Never")
    assert not after.fullmatch("60")


def test_the_device_states_are_the_enum() -> None:
    devices = version(PLURAL)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["devices"]
    states = devices["items"]["properties"]["state"]["enum"]
    assert states == [STATE_TAINTED, STATE_WOULD_TAINT, STATE_HELD_BACK, STATE_CONFLICT, STATE_SIGNALLED]


# The fields of apiextensions.k8s.io/v1 JSONSchemaProps a CRD of this project uses; anything else
# is a property written one indentation too far out, which kube-apiserver refuses on apply.
SCHEMA_KEYS = {
    "type", "description", "properties", "required", "items", "enum", "default", "format",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern", "nullable",
    "additionalProperties", "x-kubernetes-validations", "x-kubernetes-int-or-string",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-map-type", "anyOf", "oneOf", "allOf",
}  # fmt: skip


def _misplaced(schema: Any, path: str) -> list[str]:
    if not isinstance(schema, dict):
        return [f"{path}: {schema!r} is not a schema"]
    found = [f"{path}.{key}" for key in schema if key not in SCHEMA_KEYS]
    for name, child in (schema.get("properties") or {}).items():
        found += _misplaced(child, f"{path}.properties.{name}")
    if isinstance(schema.get("items"), dict):
        found += _misplaced(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        found += _misplaced(schema["additionalProperties"], f"{path}.additionalProperties")
    return found


# Every project CRD, not only this one: the mistake is one of indentation, and any file can make it.
@pytest.mark.parametrize(
    "plural", sorted(path.name.split(".")[0] for path in CRDS.glob("*.dra-operators.io.yaml"))
)
def test_every_schema_node_is_a_schema(plural: str) -> None:
    assert _misplaced(version(plural)["schema"]["openAPIV3Schema"], "openAPIV3Schema") == []


def test_the_slice_taint_signal_has_the_models_fields() -> None:
    slice_taint = spec_schema(PLURAL)["properties"]["signals"]["properties"]["sliceTaint"]
    assert set(slice_taint["properties"]) == {"key", "values", "effects"}
    assert slice_taint["required"] == ["key"]
