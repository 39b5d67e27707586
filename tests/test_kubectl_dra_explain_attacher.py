"""``kubectl dra explain policy|attachment``: what holds the binding attacher's objects, and the
way out only when the attacher is gone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from operators.dra.attachments import LABEL_POLICY, LEASE, POLICY_FINALIZER, RECORD_FINALIZER
from operators.kubectl_dra.attachexplain import (
    AttacherLease,
    attacher_running,
    explain_attachment,
    explain_policy,
)

pytestmark = pytest.mark.unit

NS = "dra-operators"
NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
DELETED = "2026-12-04T11:00:00Z"


def lease(renewed: str, holder: str = "attacher-7f9c", duration: int = 15) -> AttacherLease:
    spec = {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}
    return AttacherLease(NS, {"metadata": {"name": LEASE, "namespace": NS}, "spec": spec})


RUNNING = lease("2026-12-04T11:59:57.123456Z")
GONE = lease("2026-12-04T10:30:00.000000Z")


def record(name: str, *, phase: str = "Attached", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "labels": {LABEL_POLICY: "fabric"},
        "finalizers": [RECORD_FINALIZER],
    }
    if deleting:
        meta["deletionTimestamp"] = DELETED
    spec = {
        "claim": {"namespace": "ml", "name": "gpu"},
        "driver": "gpu.example.com",
        "pool": "p",
        "device": "d0",
    }
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def policy(*, deleting: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "fabric", "finalizers": [POLICY_FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = DELETED
    return {"metadata": meta, "spec": {}}


def texts(findings: list[Any]) -> str:
    return "\n".join(f.text for f in findings)


def test_the_lease_says_whether_the_attacher_runs() -> None:
    assert attacher_running(RUNNING, NOW)[0] is True
    assert "renewed 3 s ago" in attacher_running(RUNNING, NOW)[1].text
    assert attacher_running(GONE, NOW)[0] is False
    # Released on a clean stop: no holder.
    assert attacher_running(lease("2026-12-04T11:59:59Z", holder=""), NOW)[0] is False
    assert attacher_running(AttacherLease(NS, None), NOW)[0] is False
    unknown, finding = attacher_running(AttacherLease(NS, None, unreadable="403 Forbidden"), NOW)
    assert unknown is None
    assert "403 Forbidden" in finding.text
    assert finding.source == f"Lease {NS}/{LEASE}"


def test_a_policy_held_while_the_attacher_runs_needs_no_escape() -> None:
    findings = explain_policy(
        "fabric", policy(), [record("da-1"), record("da-2", phase="Detaching")], RUNNING, NOW
    )
    said = texts(findings)
    assert "It has 2 DeviceAttachments (Attached 1, Detaching 1)." in said
    assert f"held by the finalizers {POLICY_FINALIZER}" in said
    assert "The binding attacher runs" in said
    assert "kubectl patch" not in said


def test_a_policy_held_after_the_attacher_is_gone_names_the_escape() -> None:
    findings = explain_policy("fabric", policy(), [record("da-1"), record("da-2")], GONE, NOW)
    said = texts(findings)
    assert "does not run: its Lease has not been renewed since 2026-12-04T10:30:00.000000Z" in said
    escape = findings[-1]
    assert escape.source == 'docs/install.md, "If the binding attacher is gone first"'
    unfinalize = """--type=merge -p '{"metadata":{"finalizers":null}}'"""
    for command in (
        f"kubectl patch deviceattachments.dra-operators.io -n {NS} da-1 {unfinalize}",
        f"kubectl patch deviceattachments.dra-operators.io -n {NS} da-2 {unfinalize}",
        f"kubectl patch deviceattachpolicies.dra-operators.io fabric {unfinalize}",
    ):
        assert f"`{command}`" in escape.text
    assert escape.text.startswith("Start it again")


def test_a_policy_without_records_and_an_unreadable_lease() -> None:
    unknown = AttacherLease(NS, None, unreadable="403 Forbidden")
    said = texts(explain_policy("fabric", policy(), [], unknown, NOW))
    assert "It has 0 DeviceAttachments." in said
    assert f"No DeviceAttachment is left, so the binding attacher removes {POLICY_FINALIZER} next." in said
    assert "If it is gone: start it again" in said


def test_a_policy_that_is_not_being_deleted_or_does_not_exist() -> None:
    findings = explain_policy("fabric", policy(deleting=False), [record("da-1")], GONE, NOW)
    assert texts(findings) == "It has 1 DeviceAttachment (Attached 1)."
    assert (
        explain_policy("fabric", None, [], GONE, NOW)[0].text == "DeviceAttachPolicy fabric does not exist."
    )


def test_a_record_held_after_the_attacher_is_gone() -> None:
    findings = explain_attachment(NS, "da-1", record("da-1", phase="Detaching", deleting=True), GONE, NOW)
    said = texts(findings)
    assert (
        "It records device gpu.example.com/p/d0 of claim ml/gpu, for policy fabric, in phase Detaching."
        in said
    )
    assert f"{RECORD_FINALIZER} stays until the binding attacher has detached the device" in said
    assert f"kubectl patch deviceattachments.dra-operators.io -n {NS} da-1" in findings[-1].text
    assert "deviceattachpolicies" not in findings[-1].text
    running = texts(explain_attachment(NS, "da-1", record("da-1", deleting=True), RUNNING, NOW))
    assert "kubectl patch" not in running
