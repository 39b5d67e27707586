"""The vocabulary of the per-device state machine: what it observes and what it asks for.

:class:`Observation` gathers, per record, everything the transitions in
:mod:`.statemachine` decide on; :class:`Step` is their answer: the record status to persist
plus :class:`Effect`s, :class:`Event`s and metric hints. Keeping these plain frozen values
apart from the transitions lets the runtime build observations and execute steps without
knowing the rules in between.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from . import deadlines
from .deadlines import Backoff
from .models import (
    AttachFailure,
    DeviceAttachmentStatus,
    ReasonsSpec,
    TaintDevice,
    WaitingFor,
)
from .nodes import NodeResolution
from .selection import EntryState


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


class Outcome(enum.StrEnum):
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
    attach_backoff: Backoff = deadlines.ATTACH_RETRY
    detach_backoff: Backoff = deadlines.DETACH_RETRY
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
    outcome: Outcome | None = None
    budget_exhausted: WaitingFor | None = None
    """Set when the attach deadline was reached; the label of ``budget_exhausted_total``."""
    message: str = ""
    """Explanation for logs and events (for failures, the condition message)."""
    report_first: bool = False
    """Persist the record only after the claim write, together with ``reported``. Only for
    readiness: the scheduler waits for the claim, not for the ledger, and a crash between the
    two writes leaves an ``Attaching`` record whose repeated attach is idempotent (same key)."""
