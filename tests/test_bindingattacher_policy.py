from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from bindingattacher_builders import FABRIC, T0

from operators.bindingattacher import policy
from operators.bindingattacher.devicestatus import REASON_PATTERN
from operators.bindingattacher.models import DeviceAttachPolicy, DeviceAttachPolicySpec, TaintDevice
from operators.core import names
from operators.core.conditions import FALSE, TRUE, Condition
from operators.core.events import WARNING, ObjectRef
from operators.core.plan import RecordEvent
from operators.dra.durations import GO_DURATION_PATTERN

CRDS = Path(__file__).resolve().parents[1] / "crds"


def make(
    spec: dict[str, Any] | None = None,
    *,
    name: str = "fabric",
    uid: str = "u1",
    created: str = "2026-08-01T09:00:00Z",
) -> DeviceAttachPolicy:
    body: dict[str, Any] = {
        "driver": FABRIC,
        "bindingTimeout": "30s",
        "safetyMargin": "8s",
        "action": {"kind": "Test", "test": {"attachDelay": "2s"}},
    }
    body.update(spec or {})
    return DeviceAttachPolicy.model_validate(
        {"metadata": {"name": name, "uid": uid, "generation": 2, "creationTimestamp": created}, "spec": body}
    )


def check(p: DeviceAttachPolicy, *, test_actions: bool = True, taints: bool = True) -> policy.Verdict:
    return policy.evaluate(p, [p], test_actions_enabled=test_actions, taint_rules_served=taints)


def test_acceptance_scenario_policy_is_valid() -> None:
    verdict = check(make())
    assert verdict.accepted
    assert verdict.settings is not None
    assert verdict.settings.attach_deadline(T0) == T0 + timedelta(seconds=22)
    assert verdict.settings.action_timeout == timedelta(
        seconds=30
    ) or verdict.settings.action_timeout == timedelta(seconds=60)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (
            {"safetyMargin": "20s"},
            "spec.safetyMargin: 20s must be at least 5s and at most half of spec.bindingTimeout (30s)",
        ),
        ({"safetyMargin": "2s"}, "spec.safetyMargin"),
        ({"bindingTimeout": "5s", "safetyMargin": "5s"}, "spec.bindingTimeout: 5s must be at least 10s"),
        (
            {"nodeWaitTimeout": "40s"},
            "spec.nodeWaitTimeout: 40s must be between 1s and spec.bindingTimeout (30s)",
        ),
        ({"nodeWaitTimeout": "soon"}, "spec.nodeWaitTimeout: 'soon' is not a duration"),
        # Within the schema's pattern and maxLength, beyond what a timedelta holds.
        (
            {"bindingTimeout": "99999999999999h"},
            "spec.bindingTimeout: '99999999999999h' is longer than any duration can be",
        ),
        ({"action": {"kind": "Noop", "timeout": "0.5s"}}, "spec.action.timeout"),
        # A call holds a process-wide slot while it runs (issue #38).
        ({"action": {"kind": "Noop", "timeout": "1h"}}, "spec.action.timeout: 1h must be at most 900s"),
        ({"action": {"kind": "Noop", "noop": {"delay": "30s"}}}, "spec.action.noop.delay"),
        ({"retry": {"initialBackoff": "1m", "maxBackoff": "30s"}}, "spec.retry.initialBackoff"),
        (
            {"conditions": {"reasons": {"failed": "attach-failed"}}},
            "spec.conditions.reasons.failed: 'attach-failed'",
        ),
        ({"conditions": {"managedTypes": ["not a type"]}}, "spec.conditions.managedTypes[0]"),
        ({"driver": "Not_A_Driver"}, "spec.driver"),
        ({"concurrency": {"maxAttaches": 0}}, "spec.concurrency.maxAttaches: 0"),
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], fragment: str) -> None:
    verdict = check(make(spec))
    assert not verdict.accepted
    assert verdict.reason == "InvalidSpec"
    assert fragment in verdict.message


def test_flags_and_apis() -> None:
    disabled = check(make(), test_actions=False)
    assert (disabled.accepted, disabled.reason) == (False, "TestActionDisabled")
    always = check(make({"onFailure": {"taintDevice": "Always"}}), taints=False)
    assert (always.accepted, always.reason) == (False, "DeviceTaintRulesUnavailable")
    assert check(make({"onFailure": {"taintDevice": "Always"}})).accepted


def test_the_default_taints_a_permanently_failing_device() -> None:
    # Without the taint the scheduler picks the failing device again (the livelock of #21).
    verdict = check(make())
    assert verdict.accepted
    assert verdict.message == ""
    assert verdict.settings is not None
    machine = verdict.settings.machine_settings(probe_supported=False)
    assert machine.taint_device is TaintDevice.ON_PERMANENT_ERROR


def test_the_default_without_the_taint_api_works_as_never_and_says_so() -> None:
    verdict = check(make(), taints=False)
    assert (verdict.accepted, verdict.reason) == (True, "Valid")
    assert verdict.settings is not None
    assert verdict.settings.machine_settings(probe_supported=False).taint_device is TaintDevice.NEVER
    assert verdict.message == policy.TAINT_INACTIVE
    built = policy.with_action(verdict, "noop action")
    assert built.message == f"noop action; {policy.TAINT_INACTIVE}"


def test_duplicate_driver_oldest_wins() -> None:
    first = make(name="fabric", uid="u1", created="2026-08-01T09:00:00Z")
    second = make(name="fabric-copy", uid="u2", created="2026-08-01T09:05:00Z")
    everyone = [first, second]
    assert policy.evaluate(first, everyone, test_actions_enabled=True, taint_rules_served=True).accepted
    loser = policy.evaluate(second, everyone, test_actions_enabled=True, taint_rules_served=True)
    assert (loser.accepted, loser.reason) == (False, "DuplicateDriver")
    assert "'fabric'" in loser.message
    same_time = make(name="aaa", uid="u3", created="2026-08-01T09:00:00Z")
    assert policy.duplicate_winner(first, [first, same_time]) == "aaa"


def test_status_conditions() -> None:
    verdict = policy.with_action(check(make()), "test action (attachOutcome=Succeed)")
    allowed = policy.authorized_condition(FABRIC, True, 2)
    accepted, authorized, ready = policy.status_conditions(verdict, allowed, terminating=False, generation=2)
    assert (accepted.status, accepted.reason, accepted.observed_generation) == ("True", "Valid", 2)
    assert authorized.reason == "PermissionVerified"
    assert (ready.status, ready.reason) == ("True", "Ready")
    denied = policy.authorized_condition(FABRIC, False, 2)
    assert denied.reason == "MissingDriverPermission"
    assert f"resourceNames [{FABRIC}]" in denied.message
    assert f"grant it with `kubectl dra grant-driver {FABRIC}`" in denied.message
    elsewhere = policy.authorized_condition(FABRIC, False, 2, namespace="dra")
    assert f"`kubectl dra grant-driver {FABRIC} --namespace dra`" in elsewhere.message
    _, _, not_ready = policy.status_conditions(verdict, denied, terminating=False, generation=2)
    assert (not_ready.status, not_ready.reason) == ("False", "NotAuthorized")
    rejected = policy.Verdict.rejected("UnknownEntryPoint", "no entry point")
    _, _, not_accepted = policy.status_conditions(rejected, allowed, terminating=False, generation=2)
    assert (not_accepted.reason, not_accepted.message) == ("NotAccepted", "no entry point")
    _, _, terminating = policy.status_conditions(verdict, allowed, terminating=True, generation=2)
    assert terminating.reason == "Terminating"
    unknown = policy.authorized_condition(FABRIC, None, 2, "timeout")
    assert (unknown.status, unknown.reason) == ("Unknown", "CheckFailed")
    status = {"conditions": [ready.to_dict()]}
    assert policy.is_ready(status)
    assert not policy.is_ready({"conditions": [not_ready.to_dict()]})
    assert isinstance(ready, Condition)


def test_access_review_targets_the_driver_subresource() -> None:
    attributes = policy.access_review(FABRIC)["spec"]["resourceAttributes"]
    assert attributes == {
        "group": "resource.k8s.io",
        "resource": "resourceclaims",
        "subresource": "driver",
        "name": FABRIC,
        "namespace": "",
        "verb": "arbitrary-node:patch",
    }


def test_qualified_names() -> None:
    assert names.is_qualified_name("gpu.fabric.example.com/attached")
    assert names.is_qualified_name("attached")
    assert not names.is_qualified_name("/attached")
    assert not names.is_qualified_name("Upper.Example/attached")
    assert not names.is_qualified_name("x/" + "a" * 64)


# --- CRDs: the schema and the models agree ---------------------------------------------------------


def load_schema(name: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / name).read_text())
    version = crd["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """The object the API server's structural defaulting produces from ``{}``."""
    out: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        if "default" in prop:
            value = prop["default"]
            out[key] = defaults(prop) | value if isinstance(value, dict) else value
    return out


def test_policy_crd_defaults_match_the_model() -> None:
    spec_schema = load_schema("deviceattachpolicies.dra-operators.io.yaml")["properties"]["spec"]
    defaulted = {"driver": FABRIC, "action": {"kind": "Noop"}} | defaults(spec_schema)
    defaulted["action"] = {"kind": "Noop"} | defaults(spec_schema["properties"]["action"])
    from_crd = DeviceAttachPolicySpec.model_validate(defaulted)
    from_model = DeviceAttachPolicySpec.model_validate({"driver": FABRIC, "action": {"kind": "Noop"}})
    assert from_crd == from_model


def test_crd_patterns_match_the_code() -> None:
    spec_schema = load_schema("deviceattachpolicies.dra-operators.io.yaml")["properties"]["spec"][
        "properties"
    ]
    reasons = spec_schema["conditions"]["properties"]["reasons"]["properties"]
    assert {p["pattern"] for p in reasons.values()} == {REASON_PATTERN.pattern}
    assert all(p["maxLength"] == 64 for p in reasons.values())
    assert spec_schema["bindingTimeout"]["pattern"] == GO_DURATION_PATTERN
    assert re.fullmatch(reasons["failed"]["pattern"], "attach-failed") is None


def test_attachment_crd_has_no_status_subresource_and_the_ledger_fields() -> None:
    crd = yaml.safe_load((CRDS / "deviceattachments.dra-operators.io.yaml").read_text())
    version = crd["spec"]["versions"][0]
    assert "subresources" not in version
    assert crd["spec"]["names"]["shortNames"] == ["dattach"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status["phase"]["enum"]) == {
        "Pending",
        "Attaching",
        "Attached",
        "Failed",
        "Detaching",
        "Detached",
    }
    from operators.bindingattacher.models import DeviceAttachmentStatus

    aliases = {f.alias or n for n, f in DeviceAttachmentStatus.model_fields.items()}
    assert aliases <= set(status)


def test_a_rejection_is_told_again_at_each_new_generation_an_acceptance_only_when_it_changes() -> None:
    ref = ObjectRef("dra-operators.io/v1alpha1", "DeviceAttachPolicy", "fabric", None, "policy-uid")

    def accepted(status: str, reason: str, generation: int) -> Condition:
        return Condition(
            type=policy.ACCEPTED, status=status, reason=reason, message="m", observed_generation=generation
        )

    rejected = accepted(FALSE, "InvalidSpec", 2)
    assert policy.accepted_event(ref, rejected.to_dict(), rejected) is None
    again = policy.accepted_event(ref, rejected.to_dict(), accepted(FALSE, "InvalidSpec", 3))
    assert again == RecordEvent(ref, WARNING, "PolicyRejected", "InvalidSpec: m"), "the new spec is wrong too"
    valid = accepted(TRUE, "Valid", 2)
    assert policy.accepted_event(ref, valid.to_dict(), accepted(TRUE, "Valid", 3)) is None
