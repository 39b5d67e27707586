"""Least privilege: each operator's RBAC in manifests/ grants exactly the API calls it makes.

Every operator module declares ``API_CALLS``, the (API group, resource, verb) triples of every
request it sends, kopf's watches and leader election included. Its ClusterRole plus its Role
must grant exactly those: nothing missing (a 403 in production) and nothing extra (a broader
blast radius than needed), and never a wildcard.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators import OPERATOR_NAMES
from operators.kubectl_dra.grants import driver_grant

ROOT = Path(__file__).resolve().parents[1]


def _api_calls(operator: str) -> set[tuple[str, str, str]]:
    """An operator that is not implemented yet makes no calls, so it must be granted nothing."""
    if not (ROOT / "operators" / operator / "operator.py").is_file():
        return set()
    return set(importlib.import_module(f"operators.{operator}.operator").API_CALLS)


# What a user grants after the install, as docs/install.md says: the binding attacher may write a
# driver's claim status only once `kubectl dra grant-driver <driver>` has granted that driver.
GRANTED_AFTER_INSTALL: dict[str, list[dict[str, Any]]] = {
    "bindingattacher": driver_grant("driver.example.com", "dra-operators"),
}


def _granted(operator: str) -> set[tuple[str, str, str]]:
    docs: list[dict[str, Any]] = [
        d for d in yaml.safe_load_all((ROOT / "manifests" / operator / "rbac.yaml").read_text()) if d
    ] + GRANTED_AFTER_INSTALL.get(operator, [])
    granted: set[tuple[str, str, str]] = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        granted.add((group, resource, verb))
    return granted


@pytest.mark.parametrize("operator", OPERATOR_NAMES)
def test_rbac_grants_exactly_the_api_calls(operator: str) -> None:
    calls = _api_calls(operator)
    granted = _granted(operator)
    wildcards = {g for g in granted if "*" in g}
    assert not wildcards, f"{operator} RBAC uses wildcards: {wildcards}"
    assert granted - calls == set(), f"{operator} RBAC grants calls the operator never makes"
    assert calls - granted == set(), f"{operator} makes calls its RBAC does not grant"


@pytest.mark.parametrize("operator", OPERATOR_NAMES)
def test_leases_are_namespaced(operator: str) -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests" / operator / "rbac.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "ClusterRole":
            groups = {g for rule in doc.get("rules", []) for g in rule.get("apiGroups", [])}
            assert "coordination.k8s.io" not in groups, "Lease access belongs in the namespaced Role"
