"""Identities that make attach and detach idempotent (spec §7).

* The *allocation identity* ``(claim UID, allocationTimestamp)`` separates successive
  allocations of one claim: a deallocate/re-allocate cycle yields a new timestamp.
* The *attachment key* names one ledger record and is the backend's idempotency key. It hashes
  the canonical JSON array of the attachment identity because pool names may contain ``/``,
  which is not allowed in object names.
* The *device key* ``(driver, pool, device, shareID)`` serializes operations on one physical
  device (or one share of it) across claims and allocations.

Timestamps always enter the hash as RFC 3339 seconds in UTC, the form the API server stores, so
a key computed from a parsed and re-serialized timestamp is the same as one computed from the
wire value.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from operators.core.conditions import format_time

from .models import DeviceAttachment, DeviceRequestAllocationResult

KEY_PREFIX = "da-"
KEY_HEX_DIGITS = 40
TAINT_RULE_PREFIX = "dra-operators-"
TAINT_RULE_HEX_DIGITS = 16


@dataclass(frozen=True, order=True)
class DeviceKey:
    driver: str
    pool: str
    device: str
    share_id: str = ""

    @classmethod
    def of_result(cls, result: DeviceRequestAllocationResult) -> DeviceKey:
        return cls(result.driver, result.pool, result.device, result.share_id or "")

    @classmethod
    def of_record(cls, record: DeviceAttachment) -> DeviceKey:
        spec = record.spec
        return cls(spec.driver, spec.pool, spec.device, spec.share_id or "")

    def __str__(self) -> str:
        text = f"{self.driver}/{self.pool}/{self.device}"
        return f"{text}#{self.share_id}" if self.share_id else text


@dataclass(frozen=True)
class AllocationIdentity:
    claim_uid: str
    allocation_timestamp: str
    """Canonical RFC 3339 form; compare identities, never raw datetimes of mixed precision."""

    @classmethod
    def of(cls, claim_uid: str, allocation_timestamp: datetime) -> AllocationIdentity:
        return cls(claim_uid, format_time(allocation_timestamp))

    @classmethod
    def of_record(cls, record: DeviceAttachment) -> AllocationIdentity:
        return cls.of(record.spec.claim.uid, record.spec.allocation_timestamp)


def attachment_key(identity: AllocationIdentity, device: DeviceKey) -> str:
    canonical = json.dumps(
        [
            identity.claim_uid,
            identity.allocation_timestamp,
            device.driver,
            device.pool,
            device.device,
            device.share_id,
        ],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return KEY_PREFIX + digest[:KEY_HEX_DIGITS]


def record_key(record: DeviceAttachment) -> str:
    return attachment_key(AllocationIdentity.of_record(record), DeviceKey.of_record(record))


def taint_rule_name(device: DeviceKey) -> str:
    """Name of the DeviceTaintRule that keeps a failed device from being picked again (§14)."""
    canonical = json.dumps([device.driver, device.pool, device.device], separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return TAINT_RULE_PREFIX + digest[:TAINT_RULE_HEX_DIGITS]
