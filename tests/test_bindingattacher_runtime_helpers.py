"""Small pure helpers of the runtime side: reporting, write kinds, taint rules, events, settings,
the --binding-timeout cap and shared test inventories."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from bindingattacher_builders import ATTACH_FAILED, ATTACHED, FABRIC, NIC, claim, record, result
from pydantic import ValidationError

from operators.bindingattacher.decide import event_type, expected_reported, message, targets
from operators.bindingattacher.identity import taint_rule_name
from operators.bindingattacher.kube import EXPIRES_ANNOTATION, expired, rule_body, write_kind
from operators.bindingattacher.models import (
    AttachFailure,
    DetachReason,
    DeviceAttachmentStatus,
    DeviceAttachPolicy,
    Phase,
    Reported,
)
from operators.bindingattacher.policysync import _capped, own_inventory
from operators.bindingattacher.settings import Settings
from operators.bindingattacher.statemachine import Event
from operators.core.names import is_label_value
from operators.dra.pools import DeviceId


def _with(phase: Phase, **status: object) -> DeviceAttachmentStatus:
    return DeviceAttachmentStatus(phase=phase, **status)


def test_expected_reported_per_phase() -> None:
    failure = AttachFailure(reason="AttachFailed")
    cases = [
        (_with(Phase.ATTACHED), True, Reported.READY),
        (_with(Phase.FAILED, failure=failure), True, Reported.FAILURE),
        (_with(Phase.DETACHING, failure=failure, detach_reason=DetachReason.FAILED), True, Reported.FAILURE),
        (_with(Phase.ATTACHING), True, Reported.PROGRESS),
        (_with(Phase.PENDING), False, None),
        (_with(Phase.DETACHING, detach_reason=DetachReason.DEALLOCATED), True, None),
    ]
    for status, progress, expected in cases:
        assert expected_reported(record(status=status), progress) is expected, status


def test_write_kind_distinguishes_failure_ready_and_progress() -> None:
    def entry(**statuses: str) -> dict[str, object]:
        return {"conditions": [{"type": t, "status": s} for t, s in statuses.items()]}

    failure = frozenset({ATTACH_FAILED})
    assert write_kind([entry(**{ATTACHED: "False", ATTACH_FAILED: "True"})], failure) == "failure"
    assert write_kind([entry(**{ATTACHED: "True", ATTACH_FAILED: "False"})], failure) == "ready"
    assert write_kind([entry(**{ATTACHED: "False", ATTACH_FAILED: "False"})], failure) == "progress"


def test_taint_rule_shape_and_expiry() -> None:
    device = DeviceId(FABRIC, "fabric-pool", "f0")
    now = datetime(2026, 8, 1, tzinfo=UTC)
    body = rule_body("resource.k8s.io/v1beta2", device, "AttachFailed", "fabric", now + timedelta(minutes=10))
    assert body["apiVersion"] == "resource.k8s.io/v1beta2"
    assert body["metadata"]["name"] == taint_rule_name(device)
    assert body["spec"]["deviceSelector"] == {"driver": FABRIC, "pool": "fabric-pool", "device": "f0"}
    assert body["spec"]["taint"] == {
        "key": "dra-operators.io/attach-failed",
        "value": "AttachFailed",
        "effect": "NoSchedule",
    }
    assert not expired(body, now)
    assert expired(body, now + timedelta(minutes=10))
    body["metadata"]["annotations"][EXPIRES_ANNOTATION] = "garbage"
    assert expired(body, now)
    # Anyone who may edit the rule may write this; without a zone it is as unreadable as garbage.
    body["metadata"]["annotations"][EXPIRES_ANNOTATION] = "2026-08-01T00:10:00"
    assert expired(body, now)
    body["metadata"]["annotations"][EXPIRES_ANNOTATION] = "2026-08-01T02:10:00+02:00"
    assert (expired(body, now), expired(body, now + timedelta(minutes=10))) == (False, True)
    del body["metadata"]["annotations"][EXPIRES_ANNOTATION]
    assert not expired(body, now), "a rule without our expiry is never swept"


@pytest.mark.parametrize(
    ("reason", "value"),
    [
        ("AttachFailed", "AttachFailed"),
        ("Vendor:Timeout,", "Vendor-Timeout"),
        ("Timed_out_", "Timed_out"),
        ("A" * 62 + ",B", "A" * 62),
    ],
)
def test_the_taint_value_of_any_configured_reason_is_a_label_value(reason: str, value: str) -> None:
    """A condition reason may hold ':' and ',' and end in '_'; the API server refuses such a taint value
    (a label value), and with it the rule."""
    device = DeviceId(FABRIC, "fabric-pool", "f0")
    body = rule_body("resource.k8s.io/v1", device, reason, "fabric", datetime(2026, 8, 1, tzinfo=UTC))
    assert body["spec"]["taint"]["value"] == value
    assert is_label_value(value)


def test_event_targets_and_words() -> None:
    the_claim = claim([result("f0")], reserved=("p1", "p2", "p3"))
    the_record = record(the_claim)
    attached = targets(Event.ATTACHED, the_record, the_claim, max_pod_events=2)
    assert [t.kind for t in attached] == ["ResourceClaim", "Pod", "Pod"]
    assert [t.kind for t in targets(Event.ATTACH_STARTED, the_record, the_claim, 10)] == ["ResourceClaim"]
    assert [t.kind for t in targets(Event.DETACHED, the_record, None, 10)] == ["DeviceAttachment"]
    text = message(Event.ATTACH_FAILED, the_record, "no path")
    assert f"device {FABRIC}/fabric-pool/f0" in text
    assert the_record.metadata.name in text
    assert text.endswith(": no path")
    assert event_type(Event.ATTACH_FAILED) == "Warning"
    assert event_type(Event.ATTACHED) == "Normal"


def test_settings_validate_durations() -> None:
    settings = Settings(binding_timeout="30s", resync_period="1m")
    assert settings.binding_timeout_cap == timedelta(seconds=30)
    assert settings.resync_seconds == 60.0
    assert Settings().binding_timeout_cap is None
    with pytest.raises(ValidationError):
        Settings(binding_timeout="thirty seconds")
    with pytest.raises(ValidationError):
        Settings(resync_period="0s")


def _policy(binding_timeout: str) -> DeviceAttachPolicy:
    return DeviceAttachPolicy.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {"driver": FABRIC, "bindingTimeout": binding_timeout, "action": {"kind": "Noop"}},
        }
    )


def test_binding_timeout_is_capped_at_the_schedulers() -> None:
    assert _capped(_policy("600s"), "30s").spec.binding_timeout == "30s"
    assert _capped(_policy("20s"), "30s").spec.binding_timeout == "20s"
    assert _capped(_policy("600s"), None).spec.binding_timeout == "600s"
    assert _capped(_policy("bogus"), "30s").spec.binding_timeout == "bogus", "validation reports it"


def test_a_shared_inventory_is_split_by_driver() -> None:
    data = {
        "da-1": json.dumps({"device": f"{FABRIC}/fabric-pool/f0", "state": "attached"}),
        "da-2": json.dumps({"device": f"{NIC}/nic-a/n0", "state": "attached"}),
        "da-3": "not json",
    }
    assert set(own_inventory(data, FABRIC)) == {"da-1"}
    assert set(own_inventory(data, NIC)) == {"da-2"}
