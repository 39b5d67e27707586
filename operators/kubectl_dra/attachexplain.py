"""``kubectl dra explain policy|attachment``: what holds the deletion of the binding attacher's
own objects, and the way out when the attacher is gone.

Pure, like :mod:`.explainmodel`: it reads the DeviceAttachPolicy or DeviceAttachment, the records
of the policy, and the attacher's leader-election Lease, and returns findings that each name their
field. The attacher removes its two finalizers itself once it has detached the devices; only when
it no longer runs does the reader need the manual escape, so the findings say which case it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from operators.core.conditions import parse_time
from operators.dra.attachments import LABEL_POLICY, LEASE, POLICY_FINALIZER, RECORD_FINALIZER

from .explainmodel import Finding

DOCS_SECTION = 'docs/install.md, "If the binding attacher is gone first"'
UNFINALIZE = """--type=merge -p '{"metadata":{"finalizers":null}}'"""


@dataclass(frozen=True)
class AttacherLease:
    """The attacher's Lease as it could be read."""

    namespace: str
    lease: Mapping[str, Any] | None
    """The Lease, or None when there is none."""
    unreadable: str = ""
    """Why it could not be read (forbidden, for example); empty when it was."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def attacher_running(state: AttacherLease, now: datetime) -> tuple[bool | None, Finding]:
    """Whether the binding attacher runs, judged by its Lease: held and renewed within its
    duration. None when the Lease cannot be read."""
    source = f"Lease {state.namespace}/{LEASE}"
    if state.unreadable:
        return None, Finding(
            f"Whether the binding attacher runs is unknown: its Lease cannot be read ({state.unreadable}).",
            source,
        )
    if state.lease is None:
        return False, Finding(
            "The binding attacher does not run here: it has no Lease, which every replica takes "
            "when it starts (leader election is on by default).",
            source,
        )
    spec = state.lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    raw = spec.get("renewTime")
    renewed = parse_time(raw) if raw else None
    duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
    if holder and renewed is not None and now - renewed <= duration:
        ago = max(0, round((now - renewed).total_seconds()))
        return True, Finding(
            f"The binding attacher runs: {holder} holds its Lease, renewed {ago} s ago.",
            f"{source} .spec.holderIdentity, .spec.renewTime",
        )
    since = f" since {spec.get('renewTime')}" if renewed is not None else ""
    return False, Finding(
        f"The binding attacher does not run: its Lease has not been renewed{since}.",
        f"{source} .spec.renewTime, .spec.leaseDurationSeconds",
    )


def _way_out(running: bool | None, namespace: str, records: Sequence[str], policy: str) -> list[Finding]:
    if running:
        return []
    commands = [
        f"kubectl patch deviceattachments.dra-operators.io -n {namespace} {r} {UNFINALIZE}" for r in records
    ]
    if policy:
        commands.append(f"kubectl patch deviceattachpolicies.dra-operators.io {policy} {UNFINALIZE}")
    return [
        Finding(
            ("If it is gone: start" if running is None else "Start")
            + " it again, and it detaches the devices and removes the finalizers itself. If it cannot "
            "run any more, detach the devices on the backend by hand (each DeviceAttachment names its "
            "driver, pool, device and claim), then remove the finalizers: "
            + "; ".join(f"`{c}`" for c in commands)
            + ". Removing them while devices are still attached leaves those devices attached with "
            "nothing left that knows it.",
            DOCS_SECTION,
        )
    ]


def _record_name(record: Mapping[str, Any]) -> str:
    return str(_meta(record).get("name") or "")


def _device(record: Mapping[str, Any]) -> str:
    spec = record.get("spec") or {}
    claim = spec.get("claim") or {}
    return (
        f"device {spec.get('driver')}/{spec.get('pool')}/{spec.get('device')} "
        f"of claim {claim.get('namespace')}/{claim.get('name')}"
    )


def _phase(record: Mapping[str, Any]) -> str:
    return str((record.get("status") or {}).get("phase") or "Pending")


def _deletion(kind: str, obj: Mapping[str, Any], source: str) -> Finding:
    meta = _meta(obj)
    finalizers = list(meta.get("finalizers") or [])
    held = f" and is held by the finalizers {', '.join(finalizers)}." if finalizers else "."
    return Finding(
        f"The {kind} is being deleted since {meta['deletionTimestamp']}{held}",
        f"{source} .metadata.deletionTimestamp, .metadata.finalizers",
    )


def explain_policy(
    name: str,
    policy: Mapping[str, Any] | None,
    records: Sequence[Mapping[str, Any]],
    attacher: AttacherLease,
    now: datetime,
) -> list[Finding]:
    source = f"DeviceAttachPolicy {name}"
    if policy is None:
        return [Finding(f"DeviceAttachPolicy {name} does not exist.", source)]
    mine = [r for r in records if (_meta(r).get("labels") or {}).get(LABEL_POLICY) == name]
    listed = f"DeviceAttachment {attacher.namespace} -l {LABEL_POLICY}={name}"
    phases = Counter(_phase(r) for r in mine)
    summary = ", ".join(f"{phase} {count}" for phase, count in sorted(phases.items()))
    findings = [
        Finding(
            f"It has {len(mine)} DeviceAttachment{'' if len(mine) == 1 else 's'}"
            + (f" ({summary})." if mine else "."),
            f"{listed} .status.phase",
        )
    ]
    if not _meta(policy).get("deletionTimestamp"):
        return findings
    findings.append(_deletion("policy", policy, source))
    if POLICY_FINALIZER not in (_meta(policy).get("finalizers") or []):
        return findings
    if mine:
        why = (
            f"{POLICY_FINALIZER} stays until the binding attacher has detached the devices of "
            f"these DeviceAttachments and removed them; it then removes the finalizer."
        )
    else:
        why = f"No DeviceAttachment is left, so the binding attacher removes {POLICY_FINALIZER} next."
    findings.append(Finding(why, f"{source} .metadata.finalizers"))
    running, state = attacher_running(attacher, now)
    findings.append(state)
    findings.extend(_way_out(running, attacher.namespace, [_record_name(r) for r in mine], name))
    return findings


def explain_attachment(
    namespace: str, name: str, record: Mapping[str, Any] | None, attacher: AttacherLease, now: datetime
) -> list[Finding]:
    source = f"DeviceAttachment {namespace}/{name}"
    if record is None:
        return [Finding(f"DeviceAttachment {namespace}/{name} does not exist.", source)]
    policy = str((_meta(record).get("labels") or {}).get(LABEL_POLICY) or "")
    findings = [
        Finding(
            f"It records {_device(record)}, for policy {policy or '(none)'}, in phase {_phase(record)}.",
            f"{source} .spec, .metadata.labels, .status.phase",
        )
    ]
    if not _meta(record).get("deletionTimestamp"):
        return findings
    findings.append(_deletion("record", record, source))
    if RECORD_FINALIZER not in (_meta(record).get("finalizers") or []):
        return findings
    findings.append(
        Finding(
            f"{RECORD_FINALIZER} stays until the binding attacher has detached the device; it then "
            "removes the finalizer.",
            f"{source} .metadata.finalizers",
        )
    )
    running, state = attacher_running(attacher, now)
    findings.append(state)
    findings.extend(_way_out(running, namespace, [name], ""))
    return findings
