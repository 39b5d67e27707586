"""Events of the attacher (spec §17): which object, which type, which words.

Messages name the device (``driver/pool/device``), the node and the ``attachmentKey``, and for
failures repeat the message that also went into the claim's condition, so a user reading
``kubectl describe`` on the claim, the pod or the record sees the same story. Outcome events
also go to the consumer pods (at most ``--max-pod-events``); an Event about a claim that is
gone is posted on the ledger record instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from operators.core.events import NORMAL, WARNING, ObjectRef

from .identity import DeviceKey
from .models import API_VERSION, DeviceAttachment, ResourceClaim
from .selection import pod_consumers
from .steps import Event

WARNINGS = frozenset(
    {
        Event.ATTACH_RETRYING,
        Event.ATTACH_FAILED,
        Event.ATTACH_TIMEOUT,
        Event.NODE_NOT_DETERMINED,
        Event.ATTACH_ABANDONED,
        Event.DETACH_FAILED,
        Event.ATTACHMENT_FORGOTTEN,
        Event.REPEATED_FAILURE,
    }
)
POD_EVENTS = frozenset(
    {
        Event.ATTACHED,
        Event.ATTACH_FAILED,
        Event.ATTACH_TIMEOUT,
        Event.NODE_NOT_DETERMINED,
        Event.REPEATED_FAILURE,
    }
)
RECORD_EVENTS = frozenset({Event.ATTACHMENT_FORGOTTEN})

_WHAT = {
    Event.ATTACH_STARTED: "attach started",
    Event.ATTACH_RETRYING: "attach failed and is retried",
    Event.ATTACHED: "attached",
    Event.ATTACH_FAILED: "attach failed",
    Event.ATTACH_TIMEOUT: "attach timed out",
    Event.NODE_NOT_DETERMINED: "the target node could not be determined",
    Event.WAITING_FOR_DETACH: "waiting for the detach of a previous attachment of this device",
    Event.ATTACH_ABANDONED: "attach abandoned",
    Event.DETACHED: "detached",
    Event.DETACH_FAILED: "detach keeps failing",
    Event.ATTACHMENT_FORGOTTEN: "record forgotten without a detach (dra-operators.io/forget)",
    Event.REPEATED_FAILURE: "attach keeps failing on the same device",
}


def event_type(event: Event) -> str:
    return WARNING if event in WARNINGS else NORMAL


def claim_ref(claim: ResourceClaim) -> ObjectRef:
    meta = claim.metadata
    return ObjectRef("resource.k8s.io/v1", "ResourceClaim", meta.name, meta.namespace, meta.uid)


def record_ref(record: DeviceAttachment) -> ObjectRef:
    meta = record.metadata
    return ObjectRef(API_VERSION, "DeviceAttachment", meta.name, meta.namespace, meta.uid)


def pod_refs(claim: ResourceClaim, limit: int) -> list[ObjectRef]:
    namespace = claim.metadata.namespace
    return [ObjectRef("v1", "Pod", c.name, namespace, c.uid) for c in pod_consumers(claim)[:limit]]


def message(event: Event, record: DeviceAttachment, detail: str = "") -> str:
    spec = record.spec
    parts = [
        f"{_WHAT[event]}: device {DeviceKey.of_record(record)}",
        f"claim {spec.claim.name}",
        f"node {spec.node or '(none)'}",
        f"attachment {record.metadata.name}",
    ]
    if event is Event.DETACHED and record.status.detach_reason:
        parts.append(f"reason {record.status.detach_reason.value}")
    text = ", ".join(parts)
    return f"{text}: {detail}" if detail else text


def targets(
    event: Event, record: DeviceAttachment, claim: ResourceClaim | None, max_pod_events: int
) -> Sequence[ObjectRef]:
    if claim is None or event in RECORD_EVENTS:
        return [record_ref(record)]
    refs = [claim_ref(claim)]
    if event in POD_EVENTS:
        refs += pod_refs(claim, max_pod_events)
    return refs
