"""Identities that make attach and detach idempotent (spec §7).

* The *allocation identity* ``(claim UID, allocationTimestamp)`` separates successive
  allocations of one claim: a deallocate/re-allocate cycle yields a new timestamp.
* The *attachment key* names one ledger record and is the backend's idempotency key. It hashes
  the canonical JSON array of the attachment identity because pool names may contain ``/``,
  which is not allowed in object names.
* The *device key*, the dra layer's ``DeviceId`` (driver, pool, device) and a ``shareID``,
  serializes operations on one physical device (or one share of it) across claims and
  allocations. A failure taint names the device alone.

Timestamps always enter the hash as RFC 3339 seconds in UTC, the form the API server stores, so
a key computed from a parsed and re-serialized timestamp is the same as one computed from the
wire value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.core.conditions import format_time
from operators.dra.pools import DeviceId

from .models import (
    AllocatedDeviceStatus,
    DeviceAttachment,
    DeviceAttachmentSpec,
    DeviceRequestAllocationResult,
)

Placed = DeviceRequestAllocationResult | AllocatedDeviceStatus | DeviceAttachmentSpec
"""Where a device of an allocation is named: its result, its ``status.devices`` entry, a record's spec."""

KEY_PREFIX = "da-"
KEY_HEX_DIGITS = 40
TAINT_RULE_PREFIX = "dra-operators-"
TAINT_RULE_HEX_DIGITS = 16


@dataclass(frozen=True, order=True)
class DeviceKey:
    """A published device, or one share of it (``share_id``, consumable capacity). Taints and
    kube-scheduler's reading of ``status.devices`` name the device alone, :attr:`device`."""

    device: DeviceId
    share_id: str = ""

    @classmethod
    def of(cls, placed: Placed) -> DeviceKey:
        return cls(DeviceId(placed.driver, placed.pool, placed.device), placed.share_id or "")

    @classmethod
    def of_record(cls, record: DeviceAttachment) -> DeviceKey:
        return cls.of(record.spec)

    @classmethod
    def of_entry(cls, entry: Mapping[str, Any]) -> DeviceKey:
        """The device of a ``status.devices`` entry as written (camelCase keys)."""
        return cls(DeviceId(entry["driver"], entry["pool"], entry["device"]), entry.get("shareID") or "")

    def __str__(self) -> str:
        return f"{self.device}#{self.share_id}" if self.share_id else str(self.device)


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


def attachment_key(identity: AllocationIdentity, key: DeviceKey) -> str:
    canonical = json.dumps(
        [identity.claim_uid, identity.allocation_timestamp, *key.device, key.share_id],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return KEY_PREFIX + digest[:KEY_HEX_DIGITS]


def record_key(record: DeviceAttachment) -> str:
    return attachment_key(AllocationIdentity.of_record(record), DeviceKey.of_record(record))


def taint_rule_name(device: DeviceId) -> str:
    """Name of the DeviceTaintRule that keeps a failed device from being picked again (§14)."""
    canonical = json.dumps(list(device), separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return TAINT_RULE_PREFIX + digest[:TAINT_RULE_HEX_DIGITS]
