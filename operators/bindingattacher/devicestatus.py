"""The claim ``status.devices`` entries this attacher owns (spec §11).

Entries are written with server-side apply, one field manager per driver, so that other
drivers' entries and other writers' fields inside our entries are never touched. An apply must
therefore list *every* entry the driver currently maintains for the claim: an entry left out is
removed. :func:`desired_entries` produces that full list from the ledger records of one
(claim, driver), and :func:`apply_body` wraps it with the claim's ``uid`` and
``resourceVersion`` so that a stale decision turns into a conflict instead of a wrong write;
:func:`status_plan` is that apply as a :class:`~operators.core.plan.Plan`.

Only condition types from the result's own two lists are written (never types of our own), so
the API server's limit of 8 conditions per entry can only be reached by writers that break the
same rule; the count is still capped defensively. Reasons are checked against the API server's
pattern and messages are cut to 1024 characters, so that no write is rejected as invalid.

Per phase (spec §11.2): progress writes readiness and failure types False with a stable reason
and message (retries cause no writes); readiness writes the readiness types True; a failure
writes the chosen failure type True and everything else False. After deallocation nothing is
written: the entry is gone and any write would be rejected. An entry that already shows
readiness True is copied unchanged, its ``data`` included, because readiness is never taken back
for an identity.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operators.core import wirejson
from operators.core.client import Answer, answer_of
from operators.core.conditions import FALSE, TRUE, Condition, format_time, merge
from operators.core.plan import Apply, Plan
from operators.core.texts import ELLIPSIS, truncate_chars
from operators.dra.api import GROUP, RESOURCE_CLAIMS, VERSION

from .identity import AllocationIdentity, DeviceKey, record_key
from .models import (
    AllocatedDeviceStatus,
    ConditionsSpec,
    DetachReason,
    DeviceAttachment,
    FailureKind,
    Phase,
    ReasonsSpec,
    ResourceClaim,
    WaitingFor,
)
from .selection import find_entry

MAX_CONDITIONS = 8
"""``AllocatedDeviceStatusMaxConditions``."""
MAX_REASON_LENGTH = 1024
MAX_MESSAGE_LENGTH = 1024
"""Our own cap (spec §11.2); the API server allows 32 KiB."""
MAX_DATA_BYTES = 10240
"""``AllocatedDeviceStatusDataMaxLength``."""
FIELD_MANAGER_PREFIX = "dra-operators.io/binding-attacher/"
REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def field_manager(driver: str) -> str:
    return FIELD_MANAGER_PREFIX + driver


def valid_reason(reason: str) -> bool:
    return len(reason) <= MAX_REASON_LENGTH and REASON_PATTERN.fullmatch(reason) is not None


def _reason(configured: str, default: str) -> str:
    return configured if valid_reason(configured) else default


@dataclass(frozen=True)
class ConditionSettings:
    """The policy's ``spec.conditions`` plus the policy name, which messages mention."""

    policy_name: str
    spec: ConditionsSpec = field(default_factory=ConditionsSpec)

    def manages(self, condition_type: str) -> bool:
        return not self.spec.managed_types or condition_type in self.spec.managed_types

    def readiness_types(self, record: DeviceAttachment) -> tuple[str, ...]:
        return _unique(t for t in record.spec.binding_conditions if self.manages(t))

    def failure_types(self, record: DeviceAttachment) -> tuple[str, ...]:
        return _unique(t for t in record.spec.binding_failure_conditions if self.manages(t))

    def failure_type(self, record: DeviceAttachment, kind: FailureKind) -> str | None:
        """``f*`` of spec §11.2, with the timeout and node overrides when they are in the list."""
        failure = self.failure_types(record)
        overrides = {
            FailureKind.TIMEOUT: self.spec.timeout_failure_type,
            FailureKind.NODE: self.spec.node_failure_type,
        }
        for candidate in (overrides.get(kind, ""), self.spec.failure_type):
            if candidate and candidate in failure:
                return candidate
        return failure[0] if failure else None

    def failure_reason(self, kind: FailureKind) -> str:
        reasons, defaults = self.spec.reasons, ReasonsSpec()
        match kind:
            case FailureKind.TIMEOUT:
                return _reason(reasons.timeout, defaults.timeout)
            case FailureKind.NODE:
                return _reason(reasons.node_not_determined, defaults.node_not_determined)
            case _:
                return _reason(reasons.failed, defaults.failed)


def _unique(types: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(types))


@dataclass(frozen=True)
class WantedCondition:
    type: str
    status: str
    reason: str
    message: str = ""


class Keep(enum.Enum):
    """Leave the entry exactly as the claim shows it (copy our types unchanged)."""

    KEEP = "Keep"


KEEP = Keep.KEEP
Wanted = tuple[WantedCondition, ...] | Keep | None
"""Conditions to write, ``KEEP`` to copy the current ones, or None to leave the entry out."""


def _progress(record: DeviceAttachment, settings: ConditionSettings) -> tuple[str, str]:
    reasons, defaults = settings.spec.reasons, ReasonsSpec()
    if record.status.phase is Phase.PENDING and record.status.waiting_for is WaitingFor.NODE:
        return _reason(reasons.waiting_for_node, defaults.waiting_for_node), "waiting for the target node"
    if record.status.phase is Phase.PENDING and record.status.waiting_for is WaitingFor.PREVIOUS_DETACH:
        return (
            _reason(reasons.waiting_for_detach, defaults.waiting_for_detach),
            "waiting for the detach of a previous attachment of this device",
        )
    where = f" to node {record.spec.node}" if record.spec.node else ""
    return (
        _reason(reasons.attaching, defaults.attaching),
        f"attaching{where} by policy {settings.policy_name}",
    )


def ready_message(record: DeviceAttachment, policy_name: str) -> str:
    where = f"attached to node {record.spec.node}" if record.spec.node else "attached"
    message = f"{where} by policy {policy_name}"
    if record.status.action_message:
        message += f": {record.status.action_message}"
    return truncate_chars(message, MAX_MESSAGE_LENGTH, ELLIPSIS)


def wanted_conditions(record: DeviceAttachment, settings: ConditionSettings) -> Wanted:
    status = record.status
    readiness = settings.readiness_types(record)
    failure = settings.failure_types(record)
    after_failure = status.detach_reason is DetachReason.FAILED
    if status.phase in (Phase.DETACHING, Phase.DETACHED):
        if not after_failure:
            return None
        if status.failure is None:
            return KEEP
    if status.failure is not None and (status.phase is Phase.FAILED or after_failure):
        chosen = status.failure.condition_type
        if chosen not in failure:
            chosen = settings.failure_type(record, status.failure.kind) or ""
        reason = _reason(status.failure.reason, settings.failure_reason(status.failure.kind))
        message = truncate_chars(status.failure.message, MAX_MESSAGE_LENGTH, ELLIPSIS)
        return tuple(
            WantedCondition(t, TRUE if t == chosen else FALSE, reason, message if t == chosen else "")
            for t in _unique((*readiness, *failure))
        )
    if status.phase is Phase.ATTACHED:
        reason = _reason(settings.spec.reasons.attached, ReasonsSpec().attached)
        message = ready_message(record, settings.policy_name)
        return tuple(
            WantedCondition(t, TRUE if t in readiness else FALSE, reason, message if t in readiness else "")
            for t in _unique((*readiness, *failure))
        )
    if status.phase in (Phase.PENDING, Phase.ATTACHING) and settings.spec.report_progress:
        reason, message = _progress(record, settings)
        return tuple(WantedCondition(t, FALSE, reason, message) for t in _unique((*readiness, *failure)))
    return None


def _entry_key(record: DeviceAttachment) -> dict[str, Any]:
    spec = record.spec
    key: dict[str, Any] = {"driver": spec.driver, "pool": spec.pool, "device": spec.device}
    if spec.share_id:
        key["shareID"] = spec.share_id
    return key


def entry_data(record: DeviceAttachment) -> dict[str, Any]:
    """The optional ``data`` of an entry (``conditions.writeData``), kept under 10 KiB."""
    data: dict[str, Any] = {
        "attachmentKey": record_key(record),
        "node": record.spec.node,
        "attachedAt": format_time(record.status.attached_at) if record.status.attached_at else None,
        "action": record.status.data,
    }
    # Measured as the client writes it, as the action's data was (actions.calls.check_data).
    if len(wirejson.dumps(data).encode("utf-8")) > MAX_DATA_BYTES:
        del data["action"]
        data["truncated"] = True
    return data


def render_entry(
    record: DeviceAttachment,
    settings: ConditionSettings,
    current: AllocatedDeviceStatus | None,
    generation: int,
    now: datetime,
) -> dict[str, Any] | None:
    """One ``status.devices`` entry as we want the claim to show it, or None for no entry."""
    wanted = wanted_conditions(record, settings)
    if wanted is None:
        return None
    existing = {c.type: c for c in current.conditions} if current else {}
    readiness = settings.readiness_types(record)
    already_ready = bool(readiness) and all(t in existing and existing[t].status == TRUE for t in readiness)
    if already_ready and record.status.phase is Phase.ATTACHED:
        # Readiness once shown is never rewritten for this identity, not even its message
        # (an adopted record does not know the original action message).
        wanted = KEEP
    conditions: list[dict[str, Any]]
    if wanted is KEEP:
        ours = (*settings.readiness_types(record), *settings.failure_types(record))
        conditions = [existing[t].to_dict() for t in ours if t in existing]
        if not conditions:
            return None
    else:
        since = format_time(now)
        conditions = []
        for want in wanted[:MAX_CONDITIONS]:
            old = existing.get(want.type)
            # Only what was read: a condition parsed without a transition time holds the moment
            # it was parsed, which must not pass for one.
            read = [old.model_dump(by_alias=True, exclude_unset=True)] if old is not None else ()
            new = Condition(
                type=want.type,
                status=want.status,
                reason=want.reason,
                message=want.message,
                observed_generation=generation,
                last_transition_time=since,
            )
            conditions.extend(merge(read, new))
    entry = _entry_key(record)
    entry["conditions"] = conditions
    if settings.spec.write_data and record.status.phase is Phase.ATTACHED:
        # A record that did not write the readiness it finds (adopted, or recorded after a
        # restart) does not know the attach time or the action's data: what is shown stays.
        shown = current.data if already_ready and current is not None else None
        entry["data"] = shown if shown is not None else entry_data(record)
    return entry


def desired_entries(
    claim: ResourceClaim,
    records: Sequence[DeviceAttachment],
    settings: ConditionSettings,
    now: datetime,
    *,
    hold_progress: Collection[str] = frozenset(),
) -> list[dict[str, Any]]:
    """All entries one driver maintains on the claim's *current* allocation identity.

    Records of other identities (an older allocation being detached) contribute nothing: their
    entries were erased with their allocation, and writing them would be rejected.
    ``hold_progress`` names records whose progress entry is not written yet (a fast call may
    make it pointless); an entry the claim already shows is still listed, because leaving it
    out of the apply would remove it.
    """
    allocation = claim.status.allocation
    if allocation is None or allocation.allocation_timestamp is None:
        return []
    identity = AllocationIdentity.of(claim.metadata.uid, allocation.allocation_timestamp)
    entries: list[dict[str, Any]] = []
    for record in sorted(records, key=DeviceKey.of_record):
        if AllocationIdentity.of_record(record) != identity or not write_precondition(claim, record):
            continue
        current = find_entry(claim, DeviceKey.of_record(record))
        progress = record.status.phase in (Phase.PENDING, Phase.ATTACHING)
        if progress and current is None and record.metadata.name in hold_progress:
            continue
        entry = render_entry(record, settings, current, claim.metadata.generation, now)
        if entry is not None:
            entries.append(entry)
    return entries


def write_precondition(claim: ResourceClaim, record: DeviceAttachment) -> bool:
    """Whether the claim still holds the record's allocation identity and result (spec §11.3)."""
    allocation = claim.status.allocation
    if (
        allocation is None
        or allocation.allocation_timestamp is None
        or claim.metadata.uid != record.spec.claim.uid
    ):
        return False
    if AllocationIdentity.of_record(record) != AllocationIdentity.of(
        claim.metadata.uid, allocation.allocation_timestamp
    ):
        return False
    key = DeviceKey.of_record(record)
    return any(DeviceKey.of(r) == key and r.binding_conditions for r in allocation.devices.results)


_COMPARED = ("status", "reason", "message")


def _observed_generation(condition: Mapping[str, Any]) -> int:
    # The API server omits a zero observedGeneration (``omitempty``), and ResourceClaims have no
    # generation, so what we apply as 0 always reads back as absent.
    return int(condition.get("observedGeneration") or 0)


def _differs(shown: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    if _observed_generation(shown) != _observed_generation(wanted):
        return True
    return any(shown.get(k) != wanted.get(k) for k in _COMPARED)


def needs_write(claim: ResourceClaim, entries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether applying ``entries`` would change what the claim shows (timestamps aside)."""
    for entry in entries:
        key = DeviceKey.of_entry(entry)
        current = find_entry(claim, key)
        if current is None:
            return True
        shown = {c.type: c.to_dict() for c in current.conditions}
        for condition in entry["conditions"]:
            old = shown.get(condition["type"])
            if old is None or _differs(old, condition):
                return True
        if "data" in entry and current.data != entry["data"]:
            return True
    return False


def apply_body(claim: ResourceClaim, entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Server-side apply body for ``/status``; ``uid`` and ``resourceVersion`` act as preconditions."""
    meta = claim.metadata
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        },
        "status": {"devices": [dict(e) for e in entries]},
    }


def status_plan(claim: ResourceClaim, driver: str, entries: Sequence[Mapping[str, Any]]) -> Plan:
    """Apply one driver's entries on the claim's status, as that driver's field manager. Every
    refusal is the caller's to classify (:func:`classify_write_error`), a claim that is gone (404)
    included."""
    meta = claim.metadata
    path = RESOURCE_CLAIMS.path(meta.name, namespace=meta.namespace, subresource="status")
    body = apply_body(claim, entries)
    return Plan((Apply(path, body, tolerate=frozenset(), manager=field_manager(driver)),))


def merged_devices(
    current: Sequence[Mapping[str, Any]],
    driver: str,
    entries: Sequence[Mapping[str, Any]],
    previously_applied: Sequence[DeviceKey] = (),
) -> list[dict[str, Any]]:
    """What ``status.devices`` looks like after our apply, as the API server merges it.

    Used to reason about (and test) the ownership rule: entries of other drivers are kept as
    they are; within our entries, conditions of types we do not write stay; an entry we applied
    before and now leave out is removed.
    """

    def key_of(entry: Mapping[str, Any]) -> DeviceKey:
        return DeviceKey.of_entry(entry)

    applied = {key_of(e): e for e in entries}
    dropped = set(previously_applied) - set(applied)
    result: list[dict[str, Any]] = []
    for entry in current:
        key = key_of(entry)
        if key.device.driver != driver or key not in applied:
            if key not in dropped:
                result.append(dict(entry))
            continue
        ours = applied.pop(key)
        by_type = {c["type"]: dict(c) for c in entry.get("conditions", ())}
        by_type.update({c["type"]: dict(c) for c in ours["conditions"]})
        merged = {**entry, **ours, "conditions": list(by_type.values())}
        result.append(merged)
    result.extend(dict(e) for e in applied.values())
    return result


class WriteError(enum.StrEnum):
    """How a rejected status apply is handled (spec §11.3); values are metric ``result`` labels."""

    CONFLICT = "conflict"
    NOT_ALLOCATED = "not_allocated"
    FORBIDDEN = "forbidden"
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    TRANSIENT = "error"


_BY_ANSWER = {
    Answer.GONE: WriteError.NOT_FOUND,
    Answer.CONFLICT: WriteError.CONFLICT,
    Answer.INVALID: WriteError.INVALID,
    # Not retried either: a refusal a retry cannot change is logged and backed off like a bug.
    Answer.REFUSED: WriteError.INVALID,
    Answer.TRANSIENT: WriteError.TRANSIENT,
}


def classify_write_error(status_code: int, message: str) -> WriteError:
    """The client's :class:`~operators.core.client.Answer`, refined by what §11.3 reads in the
    message: a driver-permission denial arrives as 403 or 422, a result no longer allocated as 422."""
    if "resourceclaims/driver" in message and status_code in (403, 422):
        return WriteError.FORBIDDEN
    if status_code == 422 and "must be an allocated device" in message:
        return WriteError.NOT_ALLOCATED
    if status_code == 403:
        return WriteError.FORBIDDEN
    return _BY_ANSWER[answer_of(status_code)]
