"""The per-record state machine (spec §9): its deadlines, its vocabulary and its pure transitions.

One machine runs per ledger record. Every decision is taken from what is observed now (the
claim projection, the record, the policy and a few facts the runtime keeps, such as whether a
call is in flight), never from in-flight memory alone, so a restarted attacher reaches the same
decision as the one that died.

Deadlines, call budgets and backoff (spec §3.5 and §12): all attach deadlines are anchored at
``allocationTimestamp``, the start of kube-scheduler's claim clock, because that is the
earliest deadline the attacher can face: a second pod joining an allocated claim only gets the
remaining time. The attach deadline ends a safety margin before the scheduler's, so a failure
written at the deadline reaches the scheduler's next poll and the pod's message names our
reason (``AttachTimeout``) instead of a generic timeout. Backoff is the core's
(:class:`~operators.core.backoff.Backoff`) with ±20 % jitter; the random source is a parameter so
that the functions stay deterministic under test.

The vocabulary: :class:`Observation` gathers, per record, everything a transition decides on,
and :class:`Step` is the answer: the record status to persist plus :class:`Effect`s,
:class:`Event`s and metric hints. Both are plain frozen values, so the runtime can build
observations (:mod:`.decide`) and execute steps (:mod:`.pipeline`) without knowing the rules in
between.

The effects of a step run in this order: persist the record (create or update), then cancel,
call, write the claim status, emit events. Persisting first makes the record an intent log: it
is durable before the call it describes starts. Readiness is the exception
(``Step.report_first``): it describes no call, so the claim is written first and the record
follows.

Entry points:

* :func:`start` for an ``(identity, device)`` that has no record yet;
* :func:`advance` for an existing record on every reconcile;
* :func:`after_attach` and :func:`after_detach` when an action call returns.

Ordering rules from the spec that are easy to miss:

* "allocation identity gone" is checked before everything else for existing records;
* a failure is never written while a bound pod uses the allocation (the situation is only
  reported), and once one of *our* failures is written for an identity, every other record of
  that identity is detached while no bound pod uses it and the scheduler does not read the
  allocation as ready (with shares of one device it reads only the first entry), because that
  allocation can never become ready;
* an ``Attaching`` record whose device the claim already shows ready (``Observation.entry``)
  is ``Attached``, even past its deadline: the readiness apply goes before the record update;
* a record detached after a failure stays in ``Detached`` while its allocation is still live.
  Deleting it then would make the next reconcile adopt the claim's failure condition as a new
  record and detach a second time (the spec leaves this case open).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from operators.core.backoff import Backoff
from operators.core.conditions import time_after
from operators.dra.durations import format_seconds

from .models import (
    AttachFailure,
    DetachReason,
    DeviceAttachmentStatus,
    FailureKind,
    Phase,
    ReasonsSpec,
    Reported,
    TaintDevice,
    WaitingFor,
)
from .selection import RECHECK_SECONDS, EntryState, NodeResolution, Resolution

MIN_CALL_BUDGET = timedelta(seconds=1)
"""No attach call starts with less budget than this; the record fails with AttachTimeout."""

JITTER = 0.2


def attach_deadline(
    allocation_timestamp: datetime, binding_timeout: timedelta, safety_margin: timedelta
) -> datetime:
    return time_after(allocation_timestamp, binding_timeout - safety_margin)


def scheduler_deadline(allocation_timestamp: datetime, binding_timeout: timedelta) -> datetime:
    return time_after(allocation_timestamp, binding_timeout)


def remaining(deadline: datetime, now: datetime) -> timedelta:
    return max(deadline - now, timedelta(0))


def can_start_attach(deadline: datetime, now: datetime) -> bool:
    return deadline - now >= MIN_CALL_BUDGET


def attach_call_timeout(action_timeout: timedelta, deadline: datetime, now: datetime) -> float:
    """Seconds an attach or probe call may take: the action timeout, cut to the remaining budget."""
    return min(action_timeout, remaining(deadline, now)).total_seconds()


ATTACH_RETRY = Backoff(initial=1.0, factor=2.0, maximum=30.0, jitter=JITTER)
IN_PROGRESS = Backoff(initial=2.0, factor=1.5, maximum=15.0, jitter=JITTER)
DETACH_RETRY = Backoff(initial=5.0, factor=2.0, maximum=300.0, jitter=JITTER)
STATUS_WRITE = Backoff(initial=0.5, factor=2.0, maximum=10.0, jitter=JITTER)
LEDGER_WRITE = Backoff(initial=0.5, factor=2.0, maximum=30.0, jitter=JITTER)


def in_progress_backoff(retry_after_seconds: float | None) -> Backoff:
    """``InProgress`` polls start at the action's ``retryAfterSeconds`` when it gives one."""
    if retry_after_seconds is None or retry_after_seconds <= 0:
        return IN_PROGRESS
    return Backoff(
        initial=retry_after_seconds,
        factor=IN_PROGRESS.factor,
        maximum=max(retry_after_seconds, IN_PROGRESS.maximum),
        jitter=JITTER,
    )


def bounded_delay(delay: float, deadline: datetime, now: datetime) -> float:
    """A retry delay that never sleeps past the deadline (the deadline check then fires)."""
    return max(min(delay, remaining(deadline, now).total_seconds()), 0.0)


def timeout_message(
    waiting_for: WaitingFor,
    *,
    waited: timedelta,
    max_attaches: int | None = None,
    previous_key: str | None = None,
    last_error: str = "",
) -> str:
    """The failure message for ``AttachTimeout``; it names what was being waited for (§12.1)."""
    after = format_seconds(waited)
    if waiting_for is WaitingFor.SLOT:
        limit = f" (maxAttaches={max_attaches})" if max_attaches is not None else ""
        return f"timed out after {after} waiting for a free attach slot{limit}"
    if waiting_for is WaitingFor.PREVIOUS_DETACH:
        previous = f" {previous_key}" if previous_key else ""
        return f"timed out waiting for detach of previous attachment{previous} of this device"
    if waiting_for is WaitingFor.NODE:
        return f"timed out after {after} waiting for the target node"
    message = "the attach did not complete before the attach deadline"
    return f"{message}: {last_error}" if last_error else message


class IdentityState(enum.StrEnum):
    LIVE = "Live"
    DEALLOCATED = "Deallocated"
    REALLOCATED = "Reallocated"
    CLAIM_DELETED = "ClaimDeleted"


class Effect(enum.StrEnum):
    CANCEL_CALL = "CancelCall"
    CALL_ATTACH = "CallAttach"
    CALL_PROBE = "CallProbe"
    CALL_DETACH = "CallDetach"
    WRITE_STATUS = "WriteStatus"
    """Recompute and apply the driver's entries on the claim (devicestatus.desired_entries)."""
    TAINT_DEVICE = "TaintDevice"
    DELETE_RECORD = "DeleteRecord"
    """Remove the ``dra-operators.io/detach`` finalizer and delete the record."""


class Event(enum.StrEnum):
    ATTACH_STARTED = "AttachStarted"
    ATTACH_RETRYING = "AttachRetrying"
    ATTACHED = "Attached"
    ATTACH_FAILED = "AttachFailed"
    ATTACH_TIMEOUT = "AttachTimeout"
    NODE_NOT_DETERMINED = "NodeNotDetermined"
    WAITING_FOR_DETACH = "WaitingForDetach"
    ATTACH_ABANDONED = "AttachAbandoned"
    DETACHED = "Detached"
    DETACH_FAILED = "DetachFailed"
    ATTACHMENT_FORGOTTEN = "AttachmentForgotten"
    REPEATED_FAILURE = "RepeatedAttachFailure"


class AttachmentOutcome(enum.StrEnum):
    """Final outcome of an attachment identity: the ``outcome`` label of ``attachments_total``."""

    READY = "ready"
    FAILED = "failed"
    TIMEOUT = "timeout"
    NODE_NOT_DETERMINED = "node_not_determined"
    ABANDONED = "abandoned"
    ADOPTED = "adopted"


class CallResult(enum.StrEnum):
    """The outcome of one action call as the machine sees it (a call timeout is TRANSIENT_ERROR)."""

    SUCCEEDED = "Succeeded"
    IN_PROGRESS = "InProgress"
    TRANSIENT_ERROR = "TransientError"
    PERMANENT_ERROR = "PermanentError"


DETACH_FAILED_AFTER = 5
"""Consecutive detach failures before the first ``DetachFailed`` event."""


@dataclass(frozen=True)
class MachineSettings:
    """The policy settings the transitions depend on."""

    reasons: ReasonsSpec = field(default_factory=ReasonsSpec)
    attach_backoff: Backoff = ATTACH_RETRY
    detach_backoff: Backoff = DETACH_RETRY
    permanent_detach_retry: float = 3600.0
    taint_device: TaintDevice = TaintDevice.NEVER
    probe_supported: bool = False
    rand: Callable[[], float] = field(default=random.random, compare=False)


@dataclass(frozen=True)
class Observation:
    """Everything observed for one record (or would-be record) at ``now``."""

    now: datetime
    deadline: datetime
    """The identity's ``attachDeadline``."""
    identity: IdentityState = IdentityState.LIVE
    node: NodeResolution | None = None
    """Fresh resolution, or None once the record has a node (it never changes afterwards)."""
    entry: EntryState = EntryState.ABSENT
    """What the claim shows for the device, in the current allocation."""
    entry_failure: AttachFailure | None = None
    """Our True failure condition as the claim shows it (adoption after a restart)."""
    previous_detach_pending: bool = False
    slot_free: bool = True
    foreign_failure: bool = False
    failure_shown: bool = False
    """The claim showed a True failure condition for this identity at some point."""
    sibling_failure_reported: bool = False
    """Another of our records of the same identity has written its failure."""
    allocation_in_use: bool = False
    """A consumer pod in ``reservedFor`` is bound (``spec.nodeName`` set)."""
    reads_ready: bool = False
    """kube-scheduler reads every one of our results of the allocation as ready, so a pod binds
    to it whatever failure of ours it does not read (a later share of a device, §3.2)."""
    claim_deleting: bool = False
    call_in_flight: bool = False
    retry_at: datetime | None = None
    last_in_progress: bool = False
    """The last attach or probe answered InProgress, so the next call is a probe."""
    retries: int = 0
    """Consecutive retries of the current operation, for backoff."""
    forget: bool = False
    """The record carries ``dra-operators.io/forget: "true"``."""


@dataclass(frozen=True)
class Step:
    status: DeviceAttachmentStatus
    effects: frozenset[Effect] = frozenset()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    node: NodeResolution | None = None
    """A newly resolved node to record in ``spec.node``/``spec.nodeSource``."""
    outcome: AttachmentOutcome | None = None
    budget_exhausted: WaitingFor | None = None
    """Set when the attach deadline was reached; the label of ``budget_exhausted_total``."""
    message: str = ""
    """Explanation for logs and events (for failures, the condition message)."""
    report_first: bool = False
    """Persist the record only after the claim write, together with ``reported``. Only for
    readiness: the scheduler waits for the claim, not for the ledger, and a crash between the
    two writes leaves an ``Attaching`` record that the next run finds shown ready, and records
    as ``Attached`` without a call (whatever the deadline)."""


__all__ = [
    "AttachmentOutcome",
    "CallResult",
    "Effect",
    "Event",
    "IdentityState",
    "MachineSettings",
    "Observation",
    "Step",
    "advance",
    "after_attach",
    "after_detach",
    "start",
]

_FAILURE_EVENT = {
    FailureKind.FAILED: Event.ATTACH_FAILED,
    FailureKind.TIMEOUT: Event.ATTACH_TIMEOUT,
    FailureKind.NODE: Event.NODE_NOT_DETERMINED,
}
_FAILURE_OUTCOME = {
    FailureKind.FAILED: AttachmentOutcome.FAILED,
    FailureKind.TIMEOUT: AttachmentOutcome.TIMEOUT,
    FailureKind.NODE: AttachmentOutcome.NODE_NOT_DETERMINED,
}
_GONE_REASON = {
    IdentityState.DEALLOCATED: DetachReason.DEALLOCATED,
    IdentityState.REALLOCATED: DetachReason.REALLOCATED,
    IdentityState.CLAIM_DELETED: DetachReason.CLAIM_DELETED,
}


def _moved(status: DeviceAttachmentStatus, now: datetime, **changes: object) -> DeviceAttachmentStatus:
    phase = changes.get("phase", status.phase)
    if phase != status.phase:
        changes["last_transition_time"] = now
    if phase is not Phase.PENDING:
        changes.setdefault("waiting_for", WaitingFor.NOTHING)
    return status.model_copy(update=changes)


def _until_deadline(obs: Observation) -> float:
    return max((obs.deadline - obs.now).total_seconds(), 0.0)


def _failure_reason(kind: FailureKind, reasons: ReasonsSpec) -> str:
    match kind:
        case FailureKind.TIMEOUT:
            return reasons.timeout
        case FailureKind.NODE:
            return reasons.node_not_determined
        case _:
            return reasons.failed


def _fail(
    status: DeviceAttachmentStatus,
    obs: Observation,
    settings: MachineSettings,
    kind: FailureKind,
    message: str,
    *,
    cancel: bool = False,
) -> Step:
    if obs.allocation_in_use:
        # A bound pod uses this allocation: reporting a failure now would be wrong, so the
        # situation is only surfaced; the record keeps its phase.
        return Step(
            status, events=(_FAILURE_EVENT[kind],), message=f"not reported (allocation in use): {message}"
        )
    failure = AttachFailure(kind=kind, reason=_failure_reason(kind, settings.reasons), message=message)
    effects = {Effect.WRITE_STATUS}
    if cancel:
        effects.add(Effect.CANCEL_CALL)
    taint = settings.taint_device is TaintDevice.ALWAYS or (
        settings.taint_device is TaintDevice.ON_PERMANENT_ERROR and kind is FailureKind.FAILED
    )
    if taint:
        effects.add(Effect.TAINT_DEVICE)
    return Step(
        _moved(status, obs.now, phase=Phase.FAILED, failure=failure, last_error=message or status.last_error),
        frozenset(effects),
        events=(_FAILURE_EVENT[kind],),
        outcome=_FAILURE_OUTCOME[kind],
        budget_exhausted=status.waiting_for if kind is FailureKind.TIMEOUT else None,
        message=message,
    )


def _timeout_message(status: DeviceAttachmentStatus, obs: Observation) -> str:
    waited = obs.now - status.last_transition_time if status.last_transition_time else obs.now - obs.deadline
    return timeout_message(status.waiting_for, waited=waited, last_error=status.last_error)


def _attach(status: DeviceAttachmentStatus, obs: Observation, *, node: NodeResolution | None = None) -> Step:
    first = status.attempts == 0
    return Step(
        _moved(status, obs.now, phase=Phase.ATTACHING, attempts=status.attempts + 1),
        frozenset({Effect.CALL_ATTACH, Effect.WRITE_STATUS}),
        events=(Event.ATTACH_STARTED,) if first else (),
        requeue_after=_until_deadline(obs),
        node=node,
    )


def _wait(
    status: DeviceAttachmentStatus,
    obs: Observation,
    waiting_for: WaitingFor,
    *,
    node: NodeResolution | None = None,
) -> Step:
    newly_blocked = waiting_for is WaitingFor.PREVIOUS_DETACH and status.waiting_for is not waiting_for
    events = (Event.WAITING_FOR_DETACH,) if newly_blocked else ()
    # Waits are re-checked on a short period as well as on events: a missed wake-up (for
    # example the previous holder's record deleted while this claim was not queued) then
    # costs at most a couple of seconds of the attach budget.
    recheck = min(_until_deadline(obs), RECHECK_SECONDS)
    return Step(
        _moved(status, obs.now, phase=Phase.PENDING, waiting_for=waiting_for),
        frozenset({Effect.WRITE_STATUS}),
        events=events,
        requeue_after=recheck,
        node=node,
    )


def _what_blocks(obs: Observation) -> WaitingFor | None:
    if obs.node is not None and obs.node.status is Resolution.WAITING:
        return WaitingFor.NODE
    if obs.previous_detach_pending:
        return WaitingFor.PREVIOUS_DETACH
    if not obs.slot_free:
        return WaitingFor.SLOT
    if obs.foreign_failure:
        return WaitingFor.NOTHING
    return None


def start(obs: Observation, settings: MachineSettings) -> Step | None:
    """Decide the first state of a record for one of our results; None creates nothing."""
    fresh = DeviceAttachmentStatus(last_transition_time=obs.now)
    if obs.identity is not IdentityState.LIVE:
        return None
    # Adoption comes first: the claim already shows a final state from an earlier instance.
    if obs.entry is EntryState.READY:
        status = _moved(
            fresh, obs.now, phase=Phase.ATTACHED, attempts=1, adopted=True, reported=Reported.READY
        )
        return Step(status, outcome=AttachmentOutcome.ADOPTED)
    if obs.entry is EntryState.FAILED:
        failure = obs.entry_failure or AttachFailure(reason=settings.reasons.failed)
        status = _moved(
            fresh,
            obs.now,
            phase=Phase.FAILED,
            attempts=1,
            adopted=True,
            failure=failure,
            reported=Reported.FAILURE,
        )
        return Step(status, outcome=AttachmentOutcome.ADOPTED)
    if obs.claim_deleting:
        return None
    if not can_start_attach(obs.deadline, obs.now):
        if obs.allocation_in_use:
            return None
        message = "the attach deadline had passed before the attach could start"
        return _fail(fresh, obs, settings, FailureKind.TIMEOUT, message)
    if obs.node is not None and obs.node.status is Resolution.FAILED:
        return _fail(fresh, obs, settings, FailureKind.NODE, obs.node.message)
    resolved = obs.node if obs.node is not None and obs.node.status is Resolution.RESOLVED else None
    blocker = _what_blocks(obs)
    if blocker is not None:
        return _wait(fresh, obs, blocker, node=resolved)
    return _attach(fresh, obs, node=resolved)


def _detach(status: DeviceAttachmentStatus, obs: Observation, reason: DetachReason, *, cancel: bool) -> Step:
    effects = {Effect.CANCEL_CALL} if cancel else set()
    if status.attempts == 0:
        # Nothing was ever called for this record, so there is nothing to detach.
        done = _moved(status, obs.now, phase=Phase.DETACHED, detach_reason=reason, detached_at=obs.now)
        keep = reason is DetachReason.FAILED and obs.identity is IdentityState.LIVE
        if not keep:
            effects.add(Effect.DELETE_RECORD)
        return Step(done, frozenset(effects))
    detaching = _moved(
        status,
        obs.now,
        phase=Phase.DETACHING,
        detach_reason=reason,
        detach_attempts=status.detach_attempts + 1,
    )
    return Step(detaching, frozenset({*effects, Effect.CALL_DETACH}))


def advance(status: DeviceAttachmentStatus, obs: Observation, settings: MachineSettings) -> Step:
    """Re-evaluate an existing record against what is observed now."""
    phase = status.phase
    if obs.forget:
        return Step(
            status,
            frozenset({Effect.CANCEL_CALL, Effect.DELETE_RECORD}),
            events=(Event.ATTACHMENT_FORGOTTEN,),
        )
    if phase is Phase.DETACHED:
        if obs.identity is IdentityState.LIVE and status.detach_reason is DetachReason.FAILED:
            return Step(status)
        return Step(status, frozenset({Effect.DELETE_RECORD}))
    if obs.identity is not IdentityState.LIVE and phase is not Phase.DETACHING:
        return _identity_gone(status, obs)
    if phase is Phase.DETACHING:
        if obs.call_in_flight:
            return Step(status)
        if obs.retry_at is not None and obs.now < obs.retry_at:
            return Step(status, requeue_after=(obs.retry_at - obs.now).total_seconds())
        return Step(
            status.model_copy(update={"detach_attempts": status.detach_attempts + 1}),
            frozenset({Effect.CALL_DETACH}),
        )
    if phase is Phase.FAILED:
        return _failed(status, obs)
    if obs.sibling_failure_reported:
        if obs.allocation_in_use or obs.reads_ready:
            # Our failure was written while no pod used the allocation, yet one is bound to it
            # now, or will bind at the scheduler's next poll (it reads one entry per device,
            # whatever its shareID): a device is never detached under a bound pod, as for the
            # failed record itself.
            return Step(status)
        return _detach(status, obs, DetachReason.FAILED, cancel=obs.call_in_flight)
    if phase is Phase.ATTACHED:
        if status.reported is not Reported.READY:
            return Step(status, frozenset({Effect.WRITE_STATUS}))
        return Step(status)
    if phase is Phase.ATTACHING and obs.entry is EntryState.READY:
        return _readiness_shown(status, obs)
    return _pending_or_attaching(status, obs, settings)


def _readiness_shown(status: DeviceAttachmentStatus, obs: Observation) -> Step:
    # An earlier run applied readiness and stopped before recording it (``Step.report_first``).
    # Readiness once shown is never taken back, so neither the deadline nor another call
    # applies: only the record is behind. A call still running is left to finish; its
    # result is then ignored as late.
    attached = _moved(status, obs.now, phase=Phase.ATTACHED, last_error="", reported=Reported.READY)
    return Step(attached, events=(Event.ATTACHED,), outcome=AttachmentOutcome.READY)


def _identity_gone(status: DeviceAttachmentStatus, obs: Observation) -> Step:
    reason = _GONE_REASON[obs.identity]
    step = _detach(status, obs, reason, cancel=obs.call_in_flight)
    abandoned = (
        status.phase in (Phase.PENDING, Phase.ATTACHING)
        and obs.now < obs.deadline
        and not obs.failure_shown
        and status.reported is not Reported.FAILURE
    )
    if not abandoned:
        return step
    message = (
        "allocation removed before the attach deadline: consumer pods deleted, or kube-scheduler timed out "
        "first; check that bindingTimeout matches the kube-scheduler configuration"
    )
    return Step(
        step.status,
        step.effects,
        events=(Event.ATTACH_ABANDONED,),
        outcome=AttachmentOutcome.ABANDONED,
        message=message,
    )


def _failed(status: DeviceAttachmentStatus, obs: Observation) -> Step:
    if obs.allocation_in_use:
        return Step(status)
    if status.reported is not Reported.FAILURE:
        return Step(status, frozenset({Effect.WRITE_STATUS}))
    if obs.reads_ready:
        # The failure sits on a share the scheduler does not read: the pod binds to the
        # allocation anyway, and the record is detached with it.
        return Step(status)
    return _detach(status, obs, DetachReason.FAILED, cancel=obs.call_in_flight)


def _pending_or_attaching(
    status: DeviceAttachmentStatus, obs: Observation, settings: MachineSettings
) -> Step:
    if obs.now >= obs.deadline:
        return _fail(status, obs, settings, FailureKind.TIMEOUT, _timeout_message(status, obs), cancel=True)
    if obs.node is not None and obs.node.status is Resolution.FAILED:
        return _fail(status, obs, settings, FailureKind.NODE, obs.node.message, cancel=True)
    resolved = obs.node if obs.node is not None and obs.node.status is Resolution.RESOLVED else None
    if status.phase is Phase.PENDING:
        blocker = _what_blocks(obs)
        if blocker is not None:
            return _wait(status, obs, blocker, node=resolved)
        if not can_start_attach(obs.deadline, obs.now):
            return _fail(status, obs, settings, FailureKind.TIMEOUT, _timeout_message(status, obs))
        return _attach(status, obs, node=resolved)
    # Attaching: a call is running, backing off, or due again.
    if obs.call_in_flight:
        return Step(status, requeue_after=_until_deadline(obs))
    if obs.retry_at is not None and obs.now < obs.retry_at:
        return Step(status, requeue_after=(obs.retry_at - obs.now).total_seconds())
    if obs.foreign_failure or not obs.slot_free:
        return Step(status, requeue_after=min(_until_deadline(obs), 2.0))
    if not can_start_attach(obs.deadline, obs.now):
        return _fail(status, obs, settings, FailureKind.TIMEOUT, _timeout_message(status, obs))
    probe = settings.probe_supported and (obs.last_in_progress or status.data is not None)
    if probe:
        return Step(status, frozenset({Effect.CALL_PROBE}), requeue_after=_until_deadline(obs))
    return Step(
        status.model_copy(update={"attempts": status.attempts + 1}),
        frozenset({Effect.CALL_ATTACH}),
        requeue_after=_until_deadline(obs),
    )


def after_attach(
    status: DeviceAttachmentStatus,
    obs: Observation,
    settings: MachineSettings,
    result: CallResult,
    *,
    message: str = "",
    data: dict[str, object] | None = None,
    retry_after_seconds: float | None = None,
) -> Step:
    """Apply the result of an attach or probe call. Late results for a moved-on record are ignored."""
    if status.phase is not Phase.ATTACHING:
        return Step(status, message="late result ignored")
    if obs.identity is not IdentityState.LIVE or obs.sibling_failure_reported:
        return advance(status, obs, settings)
    updates: dict[str, object] = {"action_message": message}
    if data is not None:
        updates["data"] = data
    if result is CallResult.SUCCEEDED:
        # Readiness is written even after the attach deadline as long as no failure was written
        # for this identity: the scheduler may still accept it (spec §12.3).
        attached = _moved(
            status, obs.now, phase=Phase.ATTACHED, attached_at=obs.now, last_error="", **updates
        )
        return Step(
            attached,
            frozenset({Effect.WRITE_STATUS}),
            events=(Event.ATTACHED,),
            outcome=AttachmentOutcome.READY,
            report_first=True,
        )
    if result is CallResult.PERMANENT_ERROR:
        return _fail(
            status,
            obs,
            settings,
            FailureKind.FAILED,
            message or "the attach action reported a permanent error",
        )
    if obs.now >= obs.deadline:
        if result is not CallResult.IN_PROGRESS and message:
            status = status.model_copy(update={"last_error": message})
        return _fail(status, obs, settings, FailureKind.TIMEOUT, _timeout_message(status, obs))
    if result is CallResult.IN_PROGRESS:
        delay = in_progress_backoff(retry_after_seconds).delay(obs.retries, settings.rand)
        return Step(
            status.model_copy(update=updates),
            requeue_after=bounded_delay(delay, obs.deadline, obs.now),
        )
    delay = settings.attach_backoff.delay(obs.retries, settings.rand)
    return Step(
        status.model_copy(update={"last_error": message or "transient error"}),
        events=(Event.ATTACH_RETRYING,),
        requeue_after=bounded_delay(delay, obs.deadline, obs.now),
        message=message,
    )


def after_detach(
    status: DeviceAttachmentStatus,
    obs: Observation,
    settings: MachineSettings,
    result: CallResult,
    *,
    message: str = "",
) -> Step:
    if status.phase is not Phase.DETACHING:
        return Step(status, message="late result ignored")
    if result is CallResult.SUCCEEDED:
        done = _moved(status, obs.now, phase=Phase.DETACHED, detached_at=obs.now, last_error="")
        keep = status.detach_reason is DetachReason.FAILED and obs.identity is IdentityState.LIVE
        return Step(
            done, frozenset() if keep else frozenset({Effect.DELETE_RECORD}), events=(Event.DETACHED,)
        )
    failed = status.model_copy(update={"last_error": message or "detach failed"})
    events = (Event.DETACH_FAILED,) if status.detach_attempts >= DETACH_FAILED_AFTER else ()
    if result is CallResult.PERMANENT_ERROR:
        return Step(failed, events=events, requeue_after=settings.permanent_detach_retry, message=message)
    delay = settings.detach_backoff.delay(obs.retries, settings.rand)
    return Step(failed, events=events, requeue_after=delay, message=message)
