"""manifests/bindingattacher/rbac.yaml grants exactly what operator.API_CALLS lists."""

from __future__ import annotations

from pathlib import Path

import yaml

from operators.bindingattacher.operator import API_CALLS

RBAC = Path(__file__).parents[1] / "manifests" / "bindingattacher" / "rbac.yaml"


def _granted() -> set[tuple[str, str, str]]:
    granted = set()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if not doc or doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((group, resource, verb))
    return granted


def test_rbac_equals_the_api_calls() -> None:
    assert _granted() == set(API_CALLS)
    assert len(API_CALLS) == len(set(API_CALLS))


def test_the_driver_permission_is_limited_by_resource_names() -> None:
    for doc in yaml.safe_load_all(RBAC.read_text()):
        for rule in (doc or {}).get("rules", []):
            if "resourceclaims/driver" in rule["resources"]:
                assert rule.get("resourceNames"), "an empty list would allow every driver"
                assert rule["verbs"] == ["arbitrary-node:patch"]
    granted = _granted()
    assert ("resource.k8s.io", "resourceclaims/binding", "update") not in granted
    assert not {v for g, r, v in granted if (g, r) == ("resource.k8s.io", "resourceclaims")} - {
        "get",
        "list",
        "watch",
    }
