"""The binding attacher's driver permission: granted per driver, never by the install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from operators.kubectl_dra.grants import driver_grant

RBAC = Path(__file__).parents[1] / "manifests" / "bindingattacher" / "rbac.yaml"


def _rules(docs: list[dict[str, Any]]) -> list[dict[str, list[str]]]:
    return [rule for doc in docs if doc for rule in doc.get("rules", [])]


def test_the_install_grants_no_driver() -> None:
    shipped = _rules(list(yaml.safe_load_all(RBAC.read_text())))
    assert not [r for r in shipped if "resourceclaims/driver" in r["resources"]]


def test_the_driver_permission_is_limited_by_resource_names() -> None:
    (rule,) = _rules(driver_grant("gpu.example.com", "dra-operators"))
    assert rule["resources"] == ["resourceclaims/driver"]
    assert rule["resourceNames"] == ["gpu.example.com"], "an empty list would allow every driver"
    assert rule["verbs"] == ["arbitrary-node:patch"]


def test_claims_are_never_written_and_bindings_never_changed() -> None:
    granted = {
        (group, resource, verb)
        for rule in _rules(list(yaml.safe_load_all(RBAC.read_text())))
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert ("resource.k8s.io", "resourceclaims/binding", "update") not in granted
    assert not {v for g, r, v in granted if (g, r) == ("resource.k8s.io", "resourceclaims")} - {
        "get",
        "list",
        "watch",
    }
