"""The pure side of a claim sync: observations, Event texts and failure streaks.

The state machine's :class:`~.statemachine.Observation` is built here from what the reconciler
holds. The reconciler has the claim projection (or None when the claim is confirmed gone), the
ledger index, the policy settings, the consumer pods it read with point GETs, and a few facts
only it can know (a call in flight, the backoff timer, a free slot). These functions combine
them, so the rules of which fact means what live in one tested place:

* node resolution runs only while the record has no node yet, waiting from the moment the
  record started waiting (its creation for a new one);
* a sibling's failure counts only when *we* wrote it for the same allocation identity;
* the device is busy while another record holds it or an older one waits for it (§13.3).

The attacher's Events (spec §17) are chosen here: which object, which type, which words.
Messages name the device (``driver/pool/device``), the node and the ``attachmentKey``, and for
failures repeat the message that also went into the claim's condition, so a user reading
``kubectl describe`` on the claim, the pod or the record sees the same story. Outcome events
also go to the consumer pods (at most ``--max-pod-events``); an Event about a claim that is gone
is posted on the ledger record instead. :func:`event_plan` turns the Events a sync collected
into the :class:`~operators.core.plan.RecordEvent` steps of a plan, and :func:`refusal_events`
those that tell of a refused status write.

Failure streaks catch claims that keep failing on the same device (the livelock the default
policy used to allow). When an attach fails, kube-scheduler deallocates the claim and schedules
it again; nothing stops it from picking the same device, so without a taint
(``onFailure.taintDevice``) the pod can fail on one device forever while others are free. Each
failed round is a new attachment identity (a new allocation), so the ledger cannot see the
repetition; :class:`FailureStreaks` does. It is bounded and in memory only: after a restart the
count starts again, which only delays the report by a few rounds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from operators.core.client import ApiError
from operators.core.events import NORMAL, WARNING, ObjectRef
from operators.core.plan import Plan, RecordEvent
from operators.dra.api import GROUP, VERSION

from .actions import CallOutcome, Operation
from .devicestatus import WriteError
from .identity import AllocationIdentity, DeviceKey, attachment_key
from .ledger import LedgerIndex, forgotten, identity_state
from .models import (
    API_VERSION,
    DeviceAttachment,
    DeviceRequestAllocationResult,
    Phase,
    Pod,
    Reported,
    ResourceClaim,
)
from .policy import PolicySettings
from .selection import (
    EntryState,
    NodeResolution,
    OurResult,
    SelectionRules,
    allocation_in_use,
    entry_state,
    foreign_failure,
    node_wait_deadline,
    own_failure_shown,
    pod_consumers,
    resolve,
    scheduler_reads_ready,
    shown_failure,
    single_node,
)
from .statemachine import (
    CallResult,
    Event,
    IdentityState,
    MachineSettings,
    Observation,
    Step,
    advance,
    after_attach,
    after_detach,
)

WAITING_PHASES = frozenset({Phase.PENDING, Phase.ATTACHING, Phase.FAILED})
FAILURE_HORIZON = timedelta(seconds=5)
"""A deadline this close may turn into a failure decision within the sync."""


def pods_needed(
    claim: ResourceClaim,
    records: Sequence[DeviceAttachment],
    unrecorded_deadlines: Sequence[datetime],
    unsuccessful_calls: Collection[str],
    now: datetime,
) -> bool:
    """Whether a decision of this sync can depend on the consumer pods, which cost a GET each.

    Pods matter for two things only: the node fallback, when the allocation names no single
    node, and "a bound pod uses the allocation", which only failure decisions ask (a record in
    ``Failed``, a call that did not succeed, an attach deadline close by). The happy path of a
    ``bindsToNode`` device therefore reads no pod. ``unrecorded_deadlines`` are the attach
    deadlines of our results that have no record yet.
    """
    if not pod_consumers(claim):
        return False
    allocation = claim.status.allocation
    pinned = allocation is not None and single_node(allocation.node_selector) is not None

    def near(deadline: datetime) -> bool:
        return now >= deadline - FAILURE_HORIZON

    for record in records:
        status = record.status
        if status.phase not in WAITING_PHASES:
            continue
        if status.phase is Phase.FAILED or record.metadata.name in unsuccessful_calls:
            return True
        if near(record.spec.deadline) or (record.spec.node_source is None and not pinned):
            return True
    return any(not pinned or near(deadline) for deadline in unrecorded_deadlines)


@dataclass(frozen=True)
class RuntimeFacts:
    """What only the running process knows about one record."""

    now: datetime
    pods: Sequence[Pod] = ()
    """Consumer pods from ``reservedFor`` that could be read (missing ones are left out)."""
    call_in_flight: bool = False
    retry_at: datetime | None = None
    last_in_progress: bool = False
    retries: int = 0
    slot_free: bool = True
    failure_shown: bool = False
    """The claim showed a True failure condition for this identity at some point."""


def _node(
    record: DeviceAttachment | None,
    claim: ResourceClaim,
    settings: PolicySettings,
    facts: RuntimeFacts,
    deadline: datetime,
) -> NodeResolution | None:
    if record is not None and record.spec.node_source is not None:
        return None
    allocation = claim.status.allocation
    if allocation is None:
        return None
    since = facts.now
    if record is not None and record.status.last_transition_time is not None:
        since = record.status.last_transition_time
    return resolve(
        mode=settings.spec.node_resolution,
        allocation=allocation,
        consumers=pod_consumers(claim),
        pods=facts.pods,
        now=facts.now,
        wait_deadline=node_wait_deadline(since, settings.node_wait_timeout, deadline),
    )


def sibling_failure_reported(record: DeviceAttachment, index: LedgerIndex) -> bool:
    identity = AllocationIdentity.of_record(record)
    return any(
        other.metadata.name != record.metadata.name
        and AllocationIdentity.of_record(other) == identity
        and other.status.failure is not None
        and other.status.reported is Reported.FAILURE
        for other in index.for_claim(record.spec.claim.uid)
    )


def _shown(record: DeviceAttachment, claim: ResourceClaim, all_ours: Sequence[OurResult]) -> EntryState:
    key = DeviceKey.of_record(record)
    ours = next((o for o in all_ours if o.key == key), None)
    return entry_state(claim, ours) if ours is not None else EntryState.ABSENT


def _device_busy(record: DeviceAttachment | None, index: LedgerIndex) -> bool:
    return record is not None and record.status.phase is Phase.PENDING and index.blocking(record) is not None


def observe_result(
    claim: ResourceClaim,
    ours: OurResult,
    all_ours: Sequence[OurResult],
    index: LedgerIndex,
    settings: PolicySettings,
    facts: RuntimeFacts,
    *,
    would_be: DeviceAttachment,
) -> Observation:
    """For a result without a record. ``would_be`` is the record :func:`start` would create,
    used to ask the ledger whether the device is free."""
    allocation = claim.status.allocation
    if allocation is None or allocation.allocation_timestamp is None:
        raise ValueError("observe_result needs an allocation with allocationTimestamp (see selection.select)")
    deadline = settings.attach_deadline(allocation.allocation_timestamp)
    foreign = foreign_failure(claim, all_ours)
    return Observation(
        now=facts.now,
        deadline=deadline,
        identity=IdentityState.LIVE,
        node=_node(None, claim, settings, facts, deadline),
        entry=entry_state(claim, ours),
        entry_failure=shown_failure(claim, ours),
        previous_detach_pending=index.blocking(would_be) is not None,
        slot_free=facts.slot_free,
        foreign_failure=foreign,
        failure_shown=facts.failure_shown or foreign or own_failure_shown(claim, all_ours),
        allocation_in_use=allocation_in_use(claim, facts.pods),
        claim_deleting=claim.metadata.deletion_timestamp is not None,
    )


def observe_record(
    record: DeviceAttachment,
    claim: ResourceClaim | None,
    all_ours: Sequence[OurResult],
    index: LedgerIndex,
    settings: PolicySettings,
    facts: RuntimeFacts,
) -> Observation:
    """For an existing record; ``claim`` None means the claim is confirmed gone."""
    identity = identity_state(record, claim)
    live = claim is not None and identity is IdentityState.LIVE
    foreign = foreign_failure(claim, all_ours) if live and claim else False
    shown = (
        facts.failure_shown or foreign or (live and claim is not None and own_failure_shown(claim, all_ours))
    )
    return Observation(
        now=facts.now,
        deadline=record.spec.deadline,
        identity=identity,
        node=_node(record, claim, settings, facts, record.spec.deadline) if live and claim else None,
        entry=_shown(record, claim, all_ours) if live and claim else EntryState.ABSENT,
        previous_detach_pending=_device_busy(record, index),
        slot_free=facts.slot_free,
        foreign_failure=foreign,
        failure_shown=shown,
        sibling_failure_reported=sibling_failure_reported(record, index),
        allocation_in_use=allocation_in_use(claim, facts.pods) if live and claim else False,
        reads_ready=scheduler_reads_ready(claim, all_ours) if live and claim else False,
        claim_deleting=claim is not None and claim.metadata.deletion_timestamp is not None,
        call_in_flight=facts.call_in_flight,
        retry_at=facts.retry_at,
        last_in_progress=facts.last_in_progress,
        retries=facts.retries,
        forget=forgotten(record),
    )


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
    return ObjectRef(f"{GROUP}/{VERSION}", "ResourceClaim", meta.name, meta.namespace, meta.uid)


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


def event_plan(
    events: Sequence[tuple[Event, DeviceAttachment, str]], claim: ResourceClaim | None, max_pod_events: int
) -> Plan:
    """The Events a claim sync collected (event, record, detail), each on its targets."""
    steps = []
    for event, record, detail in events:
        text = message(event, record, detail)
        for target in targets(event, record, claim, max_pod_events):
            steps.append(RecordEvent(target, event_type(event), event.value, text))
    return Plan(tuple(steps))


def missing_timestamp_event(claim: ResourceClaim) -> RecordEvent:
    return RecordEvent(
        claim_ref(claim),
        WARNING,
        "MissingAllocationTimestamp",
        "the allocation has no allocationTimestamp (not made by a kube-scheduler with binding "
        "conditions enabled); its devices are not attached",
    )


def policy_not_ready_event(
    claim: ResourceClaim, result: DeviceRequestAllocationResult, rules: SelectionRules
) -> RecordEvent:
    return RecordEvent(
        claim_ref(claim),
        WARNING,
        "AttachPolicyNotReady",
        f"device {DeviceKey.of(result)} is not attached: the DeviceAttachPolicy for driver "
        f"{rules.driver} is not Ready: {rules.not_ready_message}",
    )


def refusal_events(
    claim: ResourceClaim, driver: str, kind: WriteError, error: ApiError, owner: ObjectRef | None
) -> tuple[RecordEvent, ...]:
    """What a refused status write tells (spec §11.3): an invalid entry on the claim; a missing
    permission on the claim and on the driver's policy (``owner``), which names the grant."""
    if kind is WriteError.INVALID:
        return (RecordEvent(claim_ref(claim), WARNING, "StatusWriteInvalid", error.message),)
    if kind is not WriteError.FORBIDDEN:
        return ()
    refused = f"status.devices entries of driver {driver} were refused ({error.status}): {error.message}"
    events = [RecordEvent(claim_ref(claim), WARNING, "StatusWriteForbidden", refused)]
    if owner is not None:
        events.append(
            RecordEvent(
                owner,
                WARNING,
                "StatusWriteForbidden",
                f"status.devices writes for driver {driver} are refused: the attacher lacks "
                "resourceclaims/driver arbitrary-node:patch for this driver",
            )
        )
    return tuple(events)


REPORT_EVERY = 3
"""A streak is reported at this many failed rounds and again at each multiple of it."""
MEMORY = 4096


class FailureStreaks:
    def __init__(self, report_every: int = REPORT_EVERY, limit: int = MEMORY) -> None:
        self.report_every = report_every
        self.limit = limit
        self._counts: OrderedDict[tuple[str, DeviceKey], int] = OrderedDict()

    def failed(self, claim_uid: str, device: DeviceKey) -> int | None:
        """Count one failed round; the streak's length when it is due to be reported."""
        key = (claim_uid, device)
        count = self._counts.pop(key, 0) + 1
        self._counts[key] = count
        while len(self._counts) > self.limit:
            self._counts.popitem(last=False)
        return count if count % self.report_every == 0 else None

    def succeeded(self, claim_uid: str, device: DeviceKey) -> None:
        self._counts.pop((claim_uid, device), None)

    def __len__(self) -> int:
        return len(self._counts)


def expected_reported(record: DeviceAttachment, report_progress: bool) -> Reported | None:
    """What the claim shows for ``record`` once its entry has been applied."""
    status = record.status
    if status.phase is Phase.ATTACHED:
        return Reported.READY
    if status.failure is not None and (status.phase is Phase.FAILED or status.detach_reason is not None):
        return Reported.FAILURE
    if status.phase in (Phase.PENDING, Phase.ATTACHING) and report_progress:
        return Reported.PROGRESS
    return None


def record_step(
    record: DeviceAttachment,
    obs: Observation,
    machine: MachineSettings,
    finished: tuple[Operation, CallOutcome] | None,
) -> tuple[Step, CallResult | None]:
    """The step of an existing record: re-evaluated, or the answer to its finished call."""
    if finished is None:
        return advance(record.status, obs, machine), None
    operation, outcome = finished
    result = CallResult(outcome.result.outcome.value)
    if operation is Operation.DETACH:
        return after_detach(record.status, obs, machine, result, message=outcome.result.message), result
    step = after_attach(
        record.status,
        obs,
        machine,
        result,
        message=outcome.result.message,
        data=dict(outcome.result.data) if outcome.result.data is not None else None,
        retry_after_seconds=outcome.result.retry_after_seconds,
    )
    return step, result


def would_be_name(claim: ResourceClaim, ours: OurResult) -> str:
    """The name of the record ``ours`` gets for the claim's current allocation."""
    allocation = claim.status.allocation
    assert allocation is not None
    assert allocation.allocation_timestamp is not None
    identity = AllocationIdentity.of(claim.metadata.uid, allocation.allocation_timestamp)
    return attachment_key(identity, ours.key)
