"""The shared DeviceTaintRule projection: every served version, lenient lists, and the eviction condition."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from operators.dra.taintrules import EVICTION_IN_PROGRESS, DeviceTaintRule
from operators.dra.taints import selector_matches


def body(selector: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "k", "effect": "NoExecute", "timeAdded": "2026-03-01T12:00:00Z"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"metadata": {"name": "r", "uid": "U", "generation": 3}, "spec": spec, **extra}


def test_v1_rule() -> None:
    rule = DeviceTaintRule.model_validate(body({"driver": "d", "pool": "p", "device": "g"}))
    assert (rule.metadata.name, rule.metadata.uid, rule.metadata.generation) == ("r", "U", 3)
    assert rule.spec.taint.time_added == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert selector_matches(rule.spec.device_selector, "d", "p", "g")
    assert not selector_matches(rule.spec.device_selector, "d", "p", "other")
    assert rule.eviction_condition is None


def test_selector_fields_of_older_versions_are_read_but_do_not_match() -> None:
    selector = {"driver": "d", "deviceClassName": "gpu", "selectors": [{"cel": {"expression": "true"}}]}
    rule = DeviceTaintRule.model_validate(body(selector))
    assert rule.spec.device_selector is not None
    assert rule.spec.device_selector.device_class_name == "gpu"
    assert rule.spec.device_selector.selectors == ({"cel": {"expression": "true"}},)
    assert selector_matches(rule.spec.device_selector, "d", "any", "any")


def test_missing_selector_matches_nothing() -> None:
    assert not selector_matches(DeviceTaintRule.model_validate(body()).spec.device_selector, "d", "p", "g")


def test_null_lists_read_as_empty() -> None:
    data = body(status={"conditions": None})
    data["metadata"]["ownerReferences"] = None
    rule = DeviceTaintRule.model_validate(data)
    assert rule.status.conditions == ()
    assert rule.metadata.owner_references == ()


def test_name_and_taint_are_required() -> None:
    with pytest.raises(ValidationError):
        DeviceTaintRule.model_validate({"metadata": {}, "spec": body()["spec"]})
    with pytest.raises(ValidationError):
        DeviceTaintRule.model_validate({"metadata": {"name": "r"}, "spec": {}})


def test_eviction_condition_is_found_among_others() -> None:
    conditions = [
        {"type": "Other", "status": "True"},
        {"type": EVICTION_IN_PROGRESS, "status": "False", "reason": "NotStarted", "observedGeneration": 3},
    ]
    condition = DeviceTaintRule.model_validate(body(status={"conditions": conditions})).eviction_condition
    assert condition is not None
    assert (condition.status, condition.reason, condition.observed_generation) == ("False", "NotStarted", 3)
    assert condition.message == ""


def test_controller_reference() -> None:
    data = body()
    data["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "X", "name": "a", "uid": "A", "controller": True},
        {"apiVersion": "v1", "kind": "X", "name": "b", "uid": "B"},
    ]
    meta = DeviceTaintRule.model_validate(data).metadata
    assert meta.controlled_by("A")
    assert not meta.controlled_by("B")
