from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from bindingattacher_builders import (
    ATTACH_FAILED,
    ATTACH_TIMEOUT,
    ATTACHED,
    FABRIC,
    FOREIGN,
    NIC,
    T0,
    as_stored,
    claim,
    condition,
    entry,
    record,
    result,
)

from operators.bindingattacher.actions.calls import check_data
from operators.bindingattacher.devicestatus import (
    KEEP,
    MAX_CONDITIONS,
    ConditionSettings,
    WriteError,
    apply_body,
    classify_write_error,
    desired_entries,
    field_manager,
    merged_devices,
    needs_write,
    render_entry,
    wanted_conditions,
)
from operators.bindingattacher.identity import DeviceKey
from operators.bindingattacher.models import (
    AttachFailure,
    ConditionsSpec,
    DetachReason,
    DeviceAttachment,
    DeviceAttachmentStatus,
    FailureKind,
    Phase,
    ReasonsSpec,
    Reported,
    WaitingFor,
)
from operators.dra.pools import DeviceId

SETTINGS = ConditionSettings(policy_name="fabric")
NOW = T0 + timedelta(seconds=3)
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def with_status(**status: Any) -> DeviceAttachment:
    return record(status=DeviceAttachmentStatus(**status))


def by_type(entry_doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in entry_doc["conditions"]}


def assert_valid_for_apiserver(entry_doc: dict[str, Any]) -> None:
    conditions = entry_doc["conditions"]
    assert len(conditions) <= MAX_CONDITIONS
    assert len({c["type"] for c in conditions}) == len(conditions)
    for c in conditions:
        assert c["status"] in ("True", "False", "Unknown")
        assert REASON.fullmatch(c["reason"])
        assert len(c["reason"]) <= 1024
        assert len(c["message"]) <= 32768
        assert c["lastTransitionTime"]
        assert c["observedGeneration"] >= 0


def rendered_conditions(record: DeviceAttachment, settings: ConditionSettings) -> dict[str, dict[str, Any]]:
    """The conditions, by type, of the device entry rendered for ``record`` where none is shown yet;
    the entry must be one the API server accepts."""
    doc = render_entry(record, settings, None, 1, NOW)
    assert doc is not None
    assert_valid_for_apiserver(doc)
    return by_type(doc)


def test_progress_entry() -> None:
    doc = render_entry(with_status(phase=Phase.ATTACHING, attempts=1), SETTINGS, None, 4, NOW)
    assert doc is not None
    assert_valid_for_apiserver(doc)
    assert (doc["driver"], doc["pool"], doc["device"]) == (FABRIC, "fabric-pool", "f0")
    assert "shareID" not in doc
    conditions = by_type(doc)
    assert set(conditions) == {ATTACHED, ATTACH_FAILED, ATTACH_TIMEOUT}
    assert all(c["status"] == "False" and c["reason"] == "Attaching" for c in conditions.values())
    assert conditions[ATTACHED]["observedGeneration"] == 4
    assert conditions[ATTACHED]["lastTransitionTime"] == "2026-08-01T10:00:03Z"
    assert conditions[ATTACHED]["message"] == "attaching to node node-a by policy fabric"
    waiting = render_entry(
        with_status(phase=Phase.PENDING, waiting_for=WaitingFor.PREVIOUS_DETACH), SETTINGS, None, 1, NOW
    )
    assert waiting is not None
    assert by_type(waiting)[ATTACHED]["reason"] == "WaitingForDetach"


def test_no_progress_when_disabled() -> None:
    quiet = ConditionSettings("fabric", ConditionsSpec(report_progress=False))
    assert render_entry(with_status(phase=Phase.ATTACHING), quiet, None, 1, NOW) is None


def test_ready_entry() -> None:
    attached = with_status(phase=Phase.ATTACHED, attempts=1, action_message="via sw-2 port 7")
    conditions = rendered_conditions(attached, SETTINGS)
    assert conditions[ATTACHED]["status"] == "True"
    assert conditions[ATTACHED]["reason"] == "Attached"
    assert conditions[ATTACHED]["message"] == "attached to node node-a by policy fabric: via sw-2 port 7"
    assert conditions[ATTACH_FAILED]["status"] == "False"
    assert conditions[ATTACH_TIMEOUT]["status"] == "False"


def test_failure_entries_choose_the_failure_type() -> None:
    overrides = ConditionSettings("fabric", ConditionsSpec(timeout_failure_type=ATTACH_TIMEOUT))
    timeout = with_status(
        phase=Phase.FAILED,
        attempts=1,
        failure=AttachFailure(kind=FailureKind.TIMEOUT, reason="AttachTimeout", message="hung"),
    )
    conditions = rendered_conditions(timeout, overrides)
    assert conditions[ATTACH_TIMEOUT]["status"] == "True"
    assert conditions[ATTACH_TIMEOUT]["message"] == "hung"
    assert conditions[ATTACH_FAILED]["status"] == "False"
    assert conditions[ATTACHED]["status"] == "False"
    assert {c["reason"] for c in conditions.values()} == {"AttachTimeout"}
    # Without the override the first failure type is used.
    plain = by_type(render_entry(timeout, SETTINGS, None, 1, NOW) or {})
    assert plain[ATTACH_FAILED]["status"] == "True"
    assert plain[ATTACH_TIMEOUT]["status"] == "False"
    # A configured type missing from the result falls back to f*.
    missing = ConditionSettings("fabric", ConditionsSpec(failure_type="x.io/not-listed"))
    assert missing.failure_type(timeout, FailureKind.FAILED) == ATTACH_FAILED


def test_failure_stays_reported_while_detaching_after_failure() -> None:
    failure = AttachFailure(reason="AttachFailed", message="no path")
    detaching = with_status(
        phase=Phase.DETACHING, attempts=1, failure=failure, detach_reason=DetachReason.FAILED
    )
    doc = render_entry(detaching, SETTINGS, None, 1, NOW)
    assert doc is not None
    assert by_type(doc)[ATTACH_FAILED]["status"] == "True"
    sibling = with_status(phase=Phase.DETACHING, attempts=1, detach_reason=DetachReason.FAILED)
    assert wanted_conditions(sibling, SETTINGS) is KEEP
    shown = claim(devices=[entry("f0", [condition(ATTACHED, "True", "Attached", "attached earlier")])])
    kept = render_entry(sibling, SETTINGS, shown.status.devices[0], 1, NOW)
    assert kept is not None
    assert kept["conditions"][0]["message"] == "attached earlier"
    gone = with_status(phase=Phase.DETACHING, attempts=1, detach_reason=DetachReason.DEALLOCATED)
    assert render_entry(gone, SETTINGS, None, 1, NOW) is None


def test_transition_time_kept_when_status_unchanged() -> None:
    shown = claim(devices=[entry("f0", [condition(ATTACHED, "False"), condition(ATTACH_FAILED, "False")])])
    doc = render_entry(with_status(phase=Phase.ATTACHED), SETTINGS, shown.status.devices[0], 1, NOW)
    assert doc is not None
    conditions = by_type(doc)
    assert conditions[ATTACHED]["lastTransitionTime"] == "2026-08-01T10:00:03Z"  # False -> True
    assert conditions[ATTACH_FAILED]["lastTransitionTime"] == "2026-08-01T10:00:00Z"  # still False
    assert conditions[ATTACH_TIMEOUT]["lastTransitionTime"] == "2026-08-01T10:00:03Z"  # new


def test_a_shown_condition_without_a_transition_time_gets_this_passs() -> None:
    # The API server requires one; a condition read without one must not keep the moment it was read.
    undated = {k: v for k, v in condition(ATTACHED, "False").items() if k != "lastTransitionTime"}
    empty = {**condition(ATTACH_FAILED, "False"), "lastTransitionTime": ""}
    shown = claim(devices=[entry("f0", [undated, empty])])
    doc = render_entry(with_status(phase=Phase.ATTACHING), SETTINGS, shown.status.devices[0], 1, NOW)
    assert doc is not None
    conditions = by_type(doc)
    assert conditions[ATTACHED]["lastTransitionTime"] == "2026-08-01T10:00:03Z"
    assert conditions[ATTACH_FAILED]["lastTransitionTime"] == "2026-08-01T10:00:03Z"


def test_limits_on_reasons_messages_and_data() -> None:
    bad_reasons = ConditionSettings("fabric", ConditionsSpec(reasons=ReasonsSpec(attached="not-valid")))
    long_message = "x" * 5000
    attached = with_status(phase=Phase.ATTACHED, action_message=long_message, data={"blob": "y" * 20000})
    doc = render_entry(attached, bad_reasons, None, 1, NOW)
    assert doc is not None
    assert_valid_for_apiserver(doc)
    assert by_type(doc)[ATTACHED]["reason"] == "Attached"
    assert len(by_type(doc)[ATTACHED]["message"]) == 1024
    writing = ConditionSettings("fabric", ConditionsSpec(write_data=True))
    with_data = render_entry(attached, writing, None, 1, NOW)
    assert with_data is not None
    assert with_data["data"]["truncated"] is True
    assert "action" not in with_data["data"]
    assert len(json.dumps(with_data["data"])) <= 10240


def test_data_the_action_may_return_is_shown_whole() -> None:
    """Both limits are measured as the client writes the JSON, where ``é`` takes two bytes."""
    data = {"s": "é" * 4000}
    assert check_data(data) == (data, None)
    writing = ConditionSettings("fabric", ConditionsSpec(write_data=True))
    entry = render_entry(with_status(phase=Phase.ATTACHED, data=data), writing, None, 1, NOW)
    assert entry is not None
    assert entry["data"]["action"] == data
    assert "truncated" not in entry["data"]


def test_condition_count_is_capped() -> None:
    many_ready = [f"{FABRIC}/r{i}" for i in range(4)]
    many_fail = [f"{FABRIC}/f{i}" for i in range(4)]
    the_claim = claim([result("f0", ready=many_ready, failure=many_fail)])
    doc = render_entry(
        record(the_claim, status=DeviceAttachmentStatus(phase=Phase.ATTACHED)), SETTINGS, None, 1, NOW
    )
    assert doc is not None
    assert len(doc["conditions"]) == MAX_CONDITIONS
    assert_valid_for_apiserver(doc)


def test_two_drivers_keep_their_own_entries() -> None:
    nic_entry = entry("n0", [condition(f"{NIC}/ready", "True", "Attached")], driver=NIC, pool="node-a")
    foreign_entry = entry(
        "x0", [condition(f"{FOREIGN}/ready", "False", "Waiting")], driver=FOREIGN, pool="node-a"
    )
    plugin_condition = condition("plugin.example.com/prepared", "True", "Prepared")
    ours_before = entry("f0", [condition(ATTACHED, "False"), plugin_condition])
    the_claim = claim(
        [result("f0"), result("n0", driver=NIC, pool="node-a"), result("x0", driver=FOREIGN, pool="node-a")],
        devices=[nic_entry, ours_before, foreign_entry],
    )
    attached = record(the_claim, status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1))
    entries = desired_entries(the_claim, [attached], SETTINGS, NOW)
    assert [e["driver"] for e in entries] == [FABRIC]
    body = apply_body(the_claim, entries)
    assert body["metadata"]["uid"] == the_claim.metadata.uid
    assert body["metadata"]["resourceVersion"] == "48213"
    assert set(body) == {"apiVersion", "kind", "metadata", "status"}
    assert set(body["status"]) == {"devices"}
    current = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in the_claim.status.devices]
    merged = merged_devices(current, FABRIC, entries)
    assert merged[0] == current[0]  # nic untouched
    assert merged[2] == current[2]  # foreign untouched
    ours = {c["type"]: c for c in merged[1]["conditions"]}
    assert ours[ATTACHED]["status"] == "True"
    assert ours["plugin.example.com/prepared"]["status"] == "True"  # another writer's type stays
    assert field_manager(FABRIC) == "dra-operators.io/binding-attacher/fabric.attach-test.dra-operators.io"


def test_dropped_entries_disappear_only_for_our_driver() -> None:
    current = [entry("f0", [condition(ATTACHED, "False")]), entry("n0", [], driver=NIC, pool="node-a")]
    dropped = DeviceKey(DeviceId(FABRIC, "fabric-pool", "f0"))
    merged = merged_devices(current, FABRIC, [], previously_applied=[dropped])
    assert [e["device"] for e in merged] == ["n0"]


def test_only_the_current_allocation_is_written() -> None:
    old_claim = claim([result("f0")], timestamp=T0)
    old = record(old_claim, status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1))
    new_claim = claim([result("f0")], timestamp=T0 + timedelta(seconds=30))
    new = record(new_claim, status=DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=1))
    entries = desired_entries(new_claim, [old, new], SETTINGS, NOW)
    assert len(entries) == 1
    assert by_type(entries[0])[ATTACHED]["reason"] == "Attaching"
    assert desired_entries(claim(allocated=False), [old], SETTINGS, NOW) == []


def test_needs_write_ignores_timestamps_only() -> None:
    attached = record(status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1))
    the_claim = claim()
    entries = desired_entries(the_claim, [attached], SETTINGS, NOW)
    assert needs_write(the_claim, entries)
    shown = claim(devices=[entries[0]])
    later = desired_entries(shown, [attached], SETTINGS, NOW + timedelta(seconds=10))
    assert not needs_write(shown, later)
    # Readiness once shown is kept as is, even when the claim's generation moved on.
    regenerated = claim(devices=[entries[0]], generation=2)
    assert not needs_write(regenerated, desired_entries(regenerated, [attached], SETTINGS, NOW))
    progress = record(status=DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=1))
    shown_progress = claim(devices=desired_entries(claim(), [progress], SETTINGS, NOW))
    assert not needs_write(shown_progress, desired_entries(shown_progress, [progress], SETTINGS, NOW))
    bumped = claim(devices=desired_entries(claim(), [progress], SETTINGS, NOW), generation=2)
    assert needs_write(bumped, desired_entries(bumped, [progress], SETTINGS, NOW))


def test_entries_echoed_without_a_zero_observed_generation_need_no_write() -> None:
    progress = record(status=DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=1))
    failure = AttachFailure(kind=FailureKind.TIMEOUT, reason="AttachTimeout", message="too late")
    failed = record(status=DeviceAttachmentStatus(phase=Phase.FAILED, attempts=1, failure=failure))
    for the_record in (progress, failed):
        applied = desired_entries(claim(generation=0), [the_record], SETTINGS, NOW)
        shown = claim(devices=[as_stored(e) for e in applied], generation=0)
        assert "observedGeneration" not in shown.status.devices[0].conditions[0].to_dict()
        later = desired_entries(shown, [the_record], SETTINGS, NOW + timedelta(seconds=10))
        assert not needs_write(shown, later)
        regenerated = shown.model_copy(
            update={"metadata": shown.metadata.model_copy(update={"generation": 2})}
        )
        assert needs_write(regenerated, desired_entries(regenerated, [the_record], SETTINGS, NOW))


def test_write_errors_are_classified() -> None:
    forbidden = (
        'changing status.devices requires resource="resourceclaims/driver", verb="[arbitrary-node:patch]"'
    )
    assert classify_write_error(422, forbidden) is WriteError.FORBIDDEN
    assert classify_write_error(403, forbidden) is WriteError.FORBIDDEN
    assert classify_write_error(409, "conflict") is WriteError.CONFLICT
    assert classify_write_error(422, "status.devices[0]: must be an allocated device in the claim") is (
        WriteError.NOT_ALLOCATED
    )
    assert classify_write_error(422, "reason: Invalid value") is WriteError.INVALID
    assert classify_write_error(404, "not found") is WriteError.NOT_FOUND
    assert classify_write_error(429, "slow down") is WriteError.TRANSIENT
    assert classify_write_error(503, "") is WriteError.TRANSIENT
    assert classify_write_error(0, "connection reset") is WriteError.TRANSIENT
    assert classify_write_error(408, "request timeout") is WriteError.TRANSIENT
    # 403 without the driver permission is still a refusal of the policy's RBAC (§11.3); any
    # other refusal cannot be retried away, so it is handled like an invalid write.
    assert classify_write_error(403, "forbidden") is WriteError.FORBIDDEN
    assert classify_write_error(401, "Unauthorized") is WriteError.INVALID
    assert classify_write_error(413, "too large") is WriteError.INVALID


def test_readiness_once_shown_is_never_rewritten() -> None:
    shown = claim(devices=[entry("f0", [condition(ATTACHED, "True", "Attached", "from the first instance")])])
    adopted = record(status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, adopted=True))
    doc = render_entry(adopted, SETTINGS, shown.status.devices[0], 1, NOW)
    assert doc is not None
    assert doc["conditions"] == [shown.status.devices[0].conditions[0].to_dict()]
    assert not needs_write(shown, [doc])


def test_data_shown_with_readiness_is_kept_by_a_record_that_did_not_write_it() -> None:
    writing = ConditionSettings("fabric", ConditionsSpec(write_data=True))
    first = record(
        status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, attached_at=T0, data={"port": 7})
    )
    applied = render_entry(first, writing, None, 0, NOW)
    assert applied is not None
    shown = claim(devices=[as_stored(applied)], generation=0)
    # Recorded as Attached by the next run, which knows neither the attach time nor the data.
    recorded = record(
        status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, reported=Reported.READY)
    )
    entries = desired_entries(shown, [recorded], writing, NOW + timedelta(seconds=30))
    assert entries[0]["data"]["action"] == {"port": 7}
    assert entries[0]["data"]["attachedAt"] == "2026-08-01T10:00:00Z"
    assert not needs_write(shown, entries)
