"""The shipped RBAC of the devicetaint operator grants exactly the calls it makes (``API_CALLS``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from operators.devicetaint.operator import API_CALLS, DEFINITION

RBAC = Path(__file__).resolve().parents[1] / "manifests" / "devicetaint" / "rbac.yaml"


def documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def granted(kind: str) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for doc in documents()
        if doc["kind"] == kind
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_rbac_equals_api_calls() -> None:
    assert granted("ClusterRole") | granted("Role") == set(API_CALLS)
    assert len(API_CALLS) == len(set(API_CALLS))


def test_leases_only_in_the_operator_namespace() -> None:
    assert granted("Role") == {c for c in API_CALLS if c[0] == "coordination.k8s.io"}
    assert not [c for c in granted("ClusterRole") if c[0] == "coordination.k8s.io"]


def test_bindings_name_the_service_account() -> None:
    subjects = [s for doc in documents() if doc["kind"].endswith("Binding") for s in doc["subjects"]]
    assert {(s["kind"], s["name"]) for s in subjects} == {("ServiceAccount", DEFINITION.component_name)}
