"""The eviction guard (``manifests/components/eviction-guard``): its objects, its chart value, and
its CEL evaluated on admission requests of every case it must refuse or let through.

cel-python stands in for kube-apiserver's cel-go here; the expressions keep to what both evaluate
alike (``has``, ``in``, equality of maps), and e2e/product/test_eviction_guard.py runs the same
cases against a real 1.37 apiserver.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel

from operators.dra import taintrules
from operators.dra.api import GROUP

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = ROOT / "manifests" / "components" / "eviction-guard"
CHART = ROOT / "charts" / "dra-operators"
ANNOTATION = "dra-operators.io/allow-cluster-wide-eviction"
ALLOWED = {ANNOTATION: "true"}


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((COMPONENT / name).read_text()) if d]


def _policy(name: str) -> dict[str, Any]:
    policy, _binding = _documents(name)
    return policy


def test_the_component_ships_a_policy_and_its_binding_per_kind() -> None:
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    files = sorted(p.name for p in COMPONENT.glob("*.yaml") if p.name != "kustomization.yaml")
    assert (
        sorted(component["resources"])
        == files
        == [
            "devicehealthpolicies.yaml",
            "devicetaintrules.yaml",
            "devicetaintselectors.yaml",
        ]
    )
    guarded = set()
    for name in files:
        policy, binding = _documents(name)
        assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert (policy["kind"], binding["kind"]) == (
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        )
        assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
        assert binding["metadata"]["name"] == policy["metadata"]["name"]
        for obj in (policy, binding):
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "dra-operators"
            # Cluster-scoped: a namespace here would be ignored by the API server, and misleading.
            assert "namespace" not in obj["metadata"]
        assert policy["spec"]["failurePolicy"] == "Fail"
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["operations"] == ["CREATE", "UPDATE"]
        guarded.add((rule["apiGroups"][0], rule["resources"][0]))
        (validation,) = policy["spec"]["validations"]
        message = validation["message"]
        for words in ("evicts every pod", "effect None", f'{ANNOTATION}: "true"'):
            assert words in message, f"{name}: {words!r} not in {message!r}"
    assert guarded == {
        ("resource.k8s.io", "devicetaintrules"),
        ("dra-operators.io", "devicetaintselectors"),
        ("dra-operators.io", "devicehealthpolicies"),
    }


def test_the_rule_policy_matches_every_version_the_operators_read() -> None:
    """1.35 serves DeviceTaintRules as v1alpha3 only, 1.36 as v1beta2 only: a policy for v1 alone
    would let every NoExecute rule of those clusters through. (The chart's copy is the same file.)"""
    (rule,) = _policy("devicetaintrules.yaml")["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [GROUP]
    assert rule["resources"] == [taintrules.PLURAL]
    assert rule["apiVersions"] == list(taintrules.VERSIONS)


# Field paths the rule policy may read: each is named alike in resource.k8s.io v1 (1.37), v1beta2
# (1.36) and v1alpha3 (1.35); deviceClassName and selectors are not, having been tombstoned in 1.35.
_RULE_FIELDS_IN_EVERY_VERSION = {
    "object.metadata.annotations",
    "object.spec",
    "oldObject.spec",
    "object.spec.deviceSelector",
    "object.spec.deviceSelector.driver",
    "object.spec.deviceSelector.pool",
    "object.spec.deviceSelector.device",
    "object.spec.taint.effect",
}


def test_the_rule_policy_reads_only_fields_every_served_version_has() -> None:
    spec = _policy("devicetaintrules.yaml")["spec"]
    expressions = [v["expression"] for v in (*spec["variables"], *spec["validations"])]
    read = {
        path
        for expression in expressions
        for path in re.findall(r"\b(?:oldObject|object)(?:\.[A-Za-z]+)+", expression)
    }
    assert read, "the policy reads no field at all?"
    assert read <= _RULE_FIELDS_IN_EVERY_VERSION, sorted(read - _RULE_FIELDS_IN_EVERY_VERSION)


def test_the_chart_has_the_guard_off_by_default_and_its_files_are_the_components() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["evictionGuard"] == {"enabled": False}
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["evictionGuard"]["properties"].keys() == {"enabled"}
    assert schema["properties"]["evictionGuard"]["properties"]["enabled"]["type"] == "boolean"
    copies = {p.name: p.read_bytes() for p in (CHART / "files" / "eviction-guard").glob("*.yaml")}
    originals = {p.name: p.read_bytes() for p in COMPONENT.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert copies == originals, (
        "copy manifests/components/eviction-guard/*.yaml to charts/dra-operators/files/eviction-guard/"
    )


def test_the_docs_quote_the_refusal_and_name_the_way_in() -> None:
    page = (ROOT / "docs" / "operate.md").read_text()
    (validation,) = _policy("devicetaintrules.yaml")["spec"]["validations"]
    assert validation["message"] in page
    assert "- dra-operators/manifests/components/eviction-guard\n" in page
    assert "--set evictionGuard.enabled=true" in page
    assert f"{ANNOTATION}=true" in page


_ENVIRONMENT = celpy.Environment()


def _admits(policy: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None) -> bool:
    """Whether every validation of ``policy`` holds for a CREATE of ``obj`` (an UPDATE from ``old``),
    with the variables evaluated in order as kube-apiserver does."""
    activation: dict[str, Any] = {
        "object": json_to_cel(obj),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": "CREATE" if old is None else "UPDATE"}),
    }
    variables: dict[celtypes.StringType, Any] = {}

    def evaluate(expression: str) -> Any:
        activation["variables"] = celtypes.MapType(variables)
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression)).evaluate(activation)

    for variable in policy["spec"].get("variables", []):
        variables[celtypes.StringType(variable["name"])] = evaluate(variable["expression"])
    results = [evaluate(v["expression"]) for v in policy["spec"]["validations"]]
    assert all(isinstance(r, celtypes.BoolType) for r in results), results
    return all(bool(r) for r in results)


def _rule(
    selector: dict[str, str] | None, effect: str = "NoExecute", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/broken", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    metadata: dict[str, Any] = {"name": "r"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": metadata, "spec": spec}


def _selector(
    chosen: dict[str, Any], effect: str = "NoExecute", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "s"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": metadata,
        "spec": {"taint": {"key": "example.com/broken", "effect": effect}, "deviceSelector": chosen},
    }


@pytest.mark.parametrize(
    ("rule", "admitted"),
    [
        (_rule({}), False),
        # No selector selects no device; upstream's conformance CRUD spec writes this rule.
        (_rule(None), True),
        (_rule({}, annotations=ALLOWED), True),
        (_rule(None, annotations=ALLOWED), True),
        (_rule({}, annotations={ANNOTATION: "false"}), False),
        (_rule({}, annotations={"other": "true"}), False),
        (_rule({}, annotations={}), False),
        (_rule({"driver": "gpu.example.com"}), True),
        (_rule({"pool": "node-1"}), True),
        (_rule({"device": "gpu-0"}), True),
        (_rule({}, "None"), True),
        (_rule(None, "None"), True),
        (_rule({}, "NoSchedule"), True),
    ],
)
def test_device_taint_rules_on_create(rule: dict[str, Any], admitted: bool) -> None:
    assert _admits(_policy("devicetaintrules.yaml"), rule) is admitted


@pytest.mark.parametrize(
    ("old", "new", "admitted"),
    [
        # The dry run turned into the real thing: refused without the annotation.
        (_rule({}, "None"), _rule({}), False),
        (_rule({}, "None"), _rule({}, annotations=ALLOWED), True),
        # A narrow rule widened to every device.
        (_rule({"driver": "gpu.example.com"}), _rule({}), False),
        # Metadata only: a rule created before the policy keeps its labels and finalizers editable.
        (_rule({}), _rule({}, annotations={"note": "x"}), True),
        (_rule({}, annotations=ALLOWED), _rule({}), True),
        (_rule({"driver": "a.example.com"}), _rule({"driver": "b.example.com"}), True),
    ],
)
def test_device_taint_rules_on_update(old: dict[str, Any], new: dict[str, Any], admitted: bool) -> None:
    assert _admits(_policy("devicetaintrules.yaml"), new, old) is admitted


@pytest.mark.parametrize(
    ("selector", "admitted"),
    [
        (_selector({"allDevices": True}), False),
        (_selector({"allDevices": True}, annotations=ALLOWED), True),
        (_selector({"allDevices": True}, "None"), True),
        (_selector({"allDevices": True}, "NoSchedule"), True),
        (_selector({"allDevices": False, "driver": "gpu.example.com"}), True),
        (_selector({"driver": "gpu.example.com"}), True),
    ],
)
def test_device_taint_selectors_on_create(selector: dict[str, Any], admitted: bool) -> None:
    assert _admits(_policy("devicetaintselectors.yaml"), selector) is admitted


def test_device_taint_selectors_on_update() -> None:
    policy = _policy("devicetaintselectors.yaml")
    dry_run = _selector({"allDevices": True}, "None")
    assert not _admits(policy, _selector({"allDevices": True}), dry_run)
    assert _admits(policy, _selector({"allDevices": True}, annotations=ALLOWED), dry_run)
    assert _admits(
        policy, _selector({"allDevices": True}, annotations={"note": "x"}), _selector({"allDevices": True})
    )


def _health_policy(
    scope: dict[str, Any],
    effect: str = "NoExecute",
    max_unavailable: int | str = 1,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """As admission sees it: after the CRD's defaults (action.effect, maxUnavailable)."""
    metadata: dict[str, Any] = {"name": "p"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceHealthPolicy",
        "metadata": metadata,
        "spec": {
            "scope": scope,
            "signals": {"sliceTaint": {"key": "example.com/unhealthy"}},
            "action": {"effect": effect, "clearAfter": "10m"},
            "maxUnavailable": max_unavailable,
        },
    }


@pytest.mark.parametrize(
    ("policy", "admitted"),
    [
        (_health_policy({"allDevices": True}, max_unavailable="100%"), False),
        (_health_policy({"allDevices": True}, max_unavailable="100%", annotations=ALLOWED), True),
        (
            _health_policy({"allDevices": True}, max_unavailable="100%", annotations={ANNOTATION: "yes"}),
            False,
        ),
        # The guard left in place: any lower limit, however large, is the administrator's choice.
        (_health_policy({"allDevices": True}, max_unavailable="99%"), True),
        (_health_policy({"allDevices": True}, max_unavailable=1000), True),
        (_health_policy({"allDevices": True}), True),
        (_health_policy({"driver": "gpu.example.com"}, max_unavailable="100%"), True),
        (_health_policy({"allDevices": True}, "None", "100%"), True),
        (_health_policy({"allDevices": True}, "NoSchedule", "100%"), True),
    ],
)
def test_device_health_policies_on_create(policy: dict[str, Any], admitted: bool) -> None:
    assert _admits(_policy("devicehealthpolicies.yaml"), policy) is admitted


def test_device_health_policies_on_update() -> None:
    guard = _policy("devicehealthpolicies.yaml")
    dry_run = _health_policy({"allDevices": True}, "None", "100%")
    unguarded = _health_policy({"allDevices": True}, max_unavailable="100%")
    assert not _admits(guard, unguarded, dry_run)
    assert not _admits(guard, unguarded, _health_policy({"allDevices": True}, max_unavailable="50%"))
    allowed = _health_policy({"allDevices": True}, max_unavailable="100%", annotations=ALLOWED)
    assert _admits(guard, allowed, dry_run)
    # Metadata only: a policy stored before the guard stays editable and deletable.
    noted = _health_policy({"allDevices": True}, max_unavailable="100%", annotations={"note": "x"})
    assert _admits(guard, noted, unguarded)
