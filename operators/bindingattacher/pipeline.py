"""One claim's sync, as one linear pipeline: read, decide, write, and return a result.

``ClaimPipeline.sync(key)`` is level-triggered, in the shape of upstream's ``handleClaim``:

1. **read** the claim projection (or confirm with a live GET that a claim its records refer
   to is gone, or read it again when it was projected before one of its drivers was
   configured, see :mod:`.cache`), its ledger records, the policies, and the consumer pods
   when a decision depends on them. Nothing is decided from memory alone: what only the
   process knows (a call in flight, a backoff timer) enters as :class:`~.decide.RuntimeFacts`;
2. **records**: for every record of the claim, then for every result of ours that has no
   record yet, the state machine decides a :class:`~.statemachine.Step` (pure,
   :mod:`.decide`), and the step is executed at once: the record is persisted first (create,
   update, or the final update plus delete), then calls are cancelled and started, then
   failure taints, metrics and Events follow. Persisting first makes the record an intent
   log: a call is never started that the ledger does not know of. Records are driven one
   after the other because each decision reads the ledger as the previous write left it;
3. **claim status**: per driver, the entries the records call for are applied when they
   differ from what the claim shows, and each record remembers what the claim now shows;
4. **readiness**: a step that reports readiness (``Step.report_first``) describes no call,
   so its record is written only after the claim's apply, in one update that also records
   ``reported: Ready``: the scheduler's wait is one ledger write shorter. A readiness step
   whose entry could not be written is persisted at the end all the same;
5. the Events collected on the way are queued, and the sync returns its
   :class:`~operators.core.reconcile.Result`: ``Done``, or ``Requeue`` at the earliest time a
   step asked for. A write that finds its object changed ends the sync with the ``Requeue``
   the API layer answers (:mod:`.kube`).

Before anything is decided, every policy the claim depends on must have been evaluated at its
current generation (after a restart the policy watch and the claim watch race), and every
record must have an action instance to call; otherwise the sync is requeued shortly.

A call outcome that produced a step is consumed only after the record was persisted, so a
failed ledger write leaves the outcome in place for the retried sync.

Every write of the sync is a :class:`~operators.core.plan.Plan` that pure code builds (the
record writes in :mod:`.ledger`, the claim status in :mod:`.devicestatus`, the Events in
:mod:`.decide`) and :func:`operators.core.plan.execute` carries out, directly or through the API
layer (:mod:`.kube`), which keeps the answers in the caches. The attach, probe and detach calls
are not API writes: a step starts them, they run in the background, and their outcome is the
input of the next decision (decide, call, decide again, execute).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from operators.core.conditions import parse_time
from operators.core.keys import Key
from operators.core.plan import Plan, RecordEvent, execute
from operators.core.reconcile import Done, Requeue, Result

from . import ledger, metrics
from .actions import CallOutcome, Operation
from .actions import Outcome as ActionOutcome
from .cache import policy_key
from .calls import run_call
from .collaborators import Collaborators
from .decide import (
    FailureStreaks,
    RuntimeFacts,
    event_plan,
    expected_reported,
    missing_timestamp_event,
    observe_record,
    observe_result,
    pods_needed,
    policy_not_ready_event,
    record_step,
    refusal_events,
    would_be_name,
)
from .devicestatus import WriteError, desired_entries, needs_write, write_precondition
from .identity import AllocationIdentity, DeviceKey
from .kube import StatusWriteError, write_kind
from .ledger import new_record
from .models import (
    DeviceAttachment,
    DeviceAttachmentStatus,
    DeviceRequestAllocationResult,
    Phase,
    Pod,
    Reported,
    ResourceClaim,
    WaitingFor,
)
from .policy import PolicyState
from .policysync import policy_ref
from .selection import (
    OurResult,
    SelectionRules,
    foreign_failure,
    own_failure_shown,
    pod_consumers,
    select,
)
from .statemachine import AttachmentOutcome, CallResult, Effect, Event, Step, start

log = logging.getLogger(__name__)

NO_ACTION_RETRY_SECONDS = 5.0
PROGRESS_GRACE_SECONDS = 0.5
"""A just-started attach call has this long to finish before progress is written: a fast
action then costs one claim write (readiness) instead of two. Well inside the 2 s within
which the acceptance scenarios expect progress for slow actions."""
POLICIES_PENDING_RETRY_SECONDS = 0.5
FORBIDDEN_RETRY_SECONDS = 30.0
CONFLICTS_BEFORE_BACKOFF = 5
INVALID_MAX_BACKOFF_SECONDS = 300.0
MIN_REQUEUE_SECONDS = 0.05
_CALLS = {
    Effect.CALL_ATTACH: Operation.ATTACH,
    Effect.CALL_PROBE: Operation.PROBE,
    Effect.CALL_DETACH: Operation.DETACH,
}
_WAITING_LABEL = {
    WaitingFor.NOTHING: "none",
    WaitingFor.NODE: "node",
    WaitingFor.PREVIOUS_DETACH: "previous_detach",
    WaitingFor.SLOT: "slot",
}
_STREAK_OUTCOMES = frozenset(
    {AttachmentOutcome.FAILED, AttachmentOutcome.TIMEOUT, AttachmentOutcome.NODE_NOT_DETERMINED}
)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Readiness:
    """A readiness step whose record write waits for the claim write (``Step.report_first``)."""

    before: DeviceAttachment
    updated: DeviceAttachment
    step: Step
    policy: PolicyState
    result: CallResult | None


@dataclass
class Run:
    """What one sync collects on its way: Events, the earliest requeue, readiness to persist."""

    key: Key
    requeue_after: float | None = None
    events: list[tuple[Event, DeviceAttachment, str]] = field(default_factory=list)
    readiness: dict[str, Readiness] = field(default_factory=dict)
    """Record name -> its readiness step, persisted after the claim write."""

    def requeue(self, after: float) -> None:
        after = max(after, MIN_REQUEUE_SECONDS)
        self.requeue_after = after if self.requeue_after is None else min(self.requeue_after, after)

    def result(self) -> Result:
        if self.requeue_after is None:
            return Done()
        return Requeue(self.requeue_after, "a record asked to be looked at again")


class ClaimPipeline:
    def __init__(self, shared: Collaborators) -> None:
        self.shared = shared
        self.streaks = FailureStreaks()
        self._failure_seen: dict[str, set[str]] = {}
        self._warned: dict[str, set[tuple[str, str]]] = {}
        self._conflicts: dict[str, int] = {}
        self._invalid: dict[str, int] = {}

    def forget_claim(self, uid: str) -> None:
        """Drop per-claim memory once neither the claim nor any record of it is left."""
        self._failure_seen.pop(uid, None)
        self._warned.pop(uid, None)
        self._conflicts.pop(uid, None)
        self._invalid.pop(uid, None)

    async def sync(self, key: Key) -> Result:
        # 1. read
        claim = self.shared.cache.claims.get(key.uid)
        records = self.shared.cache.records.for_claim(key.uid)
        if claim is None and not records:
            self.forget_claim(key.uid)
            return Done()
        if claim is None or self.shared.cache.projected_without_a_driver(claim):
            claim = await self.shared.kube.claims.read(key.namespace, key.name, key.uid)
        drivers = {r.spec.driver for r in records}
        if claim is not None and claim.status.allocation is not None:
            drivers |= {r.driver for r in claim.status.allocation.devices.results}
        if not self.shared.cache.policies.settled(drivers):
            return Requeue(POLICIES_PENDING_RETRY_SECONDS, "waiting for the evaluation of a policy")
        ours: tuple[OurResult, ...] = ()
        managed: tuple[OurResult, ...] = ()
        if claim is not None:
            rules = self.shared.cache.policies.rules()
            selection = select(claim, rules)
            ours = selection.ours
            # Existing records are driven whether or not their policy is Ready now (spec §5), so
            # they are observed against every result of a configured driver.
            managed = select(claim, {d: replace(r, ready=True) for d, r in rules.items()}).ours
            await self._warn(claim, selection.missing_allocation_timestamp, selection.blocked_by_policy)
            self._remember_failures(claim, managed)
        pods = await self._pods(claim, records, ours)
        run = Run(key)
        # 2. records, then results of ours without one
        for record in records:
            current = self.shared.cache.records.get(record.metadata.name)
            if current is not None and (stop := await self._drive(current, claim, managed, pods, run)):
                return stop
        if claim is not None:
            for result in ours:
                if stop := await self._begin(result, claim, ours, pods, run):
                    return stop
            # 3. claim status (with the readiness records it shows)
            written = await self._write_statuses(claim, run)
            if not isinstance(written, ResourceClaim):
                return written
            claim = written
        # 4. readiness none of whose entries could be written (e.g. the allocation changed)
        for readiness in list(run.readiness.values()):
            if stop := await self._persist_readiness(readiness, None, claim, run):
                return stop
        # 5. Events, and the result
        await self._post_events(run, claim)
        self._conflicts.pop(key.uid, None)
        self._invalid.pop(key.uid, None)
        return run.result()

    # -- read ----------------------------------------------------------------------------------

    def _remember_failures(self, claim: ResourceClaim, ours: Sequence[OurResult]) -> None:
        allocation = claim.status.allocation
        if allocation is None or allocation.allocation_timestamp is None:
            return
        if own_failure_shown(claim, ours) or foreign_failure(claim, ours):
            identity = AllocationIdentity.of(claim.metadata.uid, allocation.allocation_timestamp)
            self._failure_seen.setdefault(claim.metadata.uid, set()).add(identity.allocation_timestamp)

    def _failure_shown(self, record: DeviceAttachment) -> bool:
        identity = AllocationIdentity.of_record(record)
        return identity.allocation_timestamp in self._failure_seen.get(identity.claim_uid, set())

    async def _pods(
        self, claim: ResourceClaim | None, records: Sequence[DeviceAttachment], ours: Sequence[OurResult]
    ) -> list[Pod]:
        """Consumer pods, read only when a decision depends on them (node fallback, failure
        writes, early detach after a failure)."""
        if claim is None:
            return []
        now = utcnow()
        known = {r.metadata.name for r in records}
        deadlines = [self._deadline(claim, o, now) for o in ours if would_be_name(claim, o) not in known]
        unsuccessful = set()
        for record in records:
            finished = self.shared.calls.outcome(record.metadata.name)
            if finished is not None and finished[1].result.outcome is not ActionOutcome.SUCCEEDED:
                unsuccessful.add(record.metadata.name)
        if not pods_needed(claim, records, deadlines, unsuccessful, now):
            return []
        return await self.shared.kube.lookups.pods(claim.metadata.namespace, pod_consumers(claim))

    def _deadline(self, claim: ResourceClaim, ours: OurResult, now: datetime) -> datetime:
        """The attach deadline a new record would get (now when unknown, which reads the pods)."""
        policy = self.shared.cache.policies.owner(ours.result.driver)
        allocation = claim.status.allocation
        if (
            policy is None
            or policy.settings is None
            or allocation is None
            or not allocation.allocation_timestamp
        ):
            return now
        return policy.settings.attach_deadline(allocation.allocation_timestamp)

    async def _warn(
        self,
        claim: ResourceClaim,
        missing_timestamp: bool,
        blocked: Sequence[tuple[DeviceRequestAllocationResult, SelectionRules]],
    ) -> None:
        """Warn once per allocation of what keeps its devices from being attached."""
        allocation = claim.status.allocation
        if allocation is None:
            return
        uid = claim.metadata.uid
        stamp = allocation.allocation_timestamp.isoformat() if allocation.allocation_timestamp else "-"
        warned = self._warned.setdefault(uid, set())
        warnings: list[RecordEvent] = []
        if missing_timestamp and (stamp, "") not in warned:
            warned.add((stamp, ""))
            warnings.append(missing_timestamp_event(claim))
        for result, rules in blocked:
            if (stamp, rules.driver) in warned:
                continue
            warned.add((stamp, rules.driver))
            warnings.append(policy_not_ready_event(claim, result, rules))
        await execute(Plan(tuple(warnings)), self.shared)

    # -- records: decide, then execute ------------------------------------------------------------

    async def _drive(
        self,
        record: DeviceAttachment,
        claim: ResourceClaim | None,
        ours: Sequence[OurResult],
        pods: Sequence[Pod],
        run: Run,
    ) -> Result | None:
        policy = self.shared.cache.policies.for_record(record)
        if policy is None or policy.settings is None:
            log.info(
                "record %s waits for an accepted policy for driver %s",
                record.metadata.name,
                record.spec.driver,
                extra={"object": f"deviceattachment {record.metadata.name}"},
            )
            run.requeue(NO_ACTION_RETRY_SECONDS)
            return None
        settings = policy.settings
        name = record.metadata.name
        runtime = self.shared.calls.runtime(name)
        facts = RuntimeFacts(
            now=utcnow(),
            pods=pods,
            call_in_flight=self.shared.calls.in_flight(name),
            retry_at=runtime.retry_at,
            last_in_progress=runtime.last_in_progress,
            retries=runtime.retries,
            slot_free=self.shared.calls.slot_free(policy.name, settings.spec.concurrency.max_attaches),
            failure_shown=self._failure_shown(record),
        )
        obs = observe_record(record, claim, ours, self.shared.cache.records, settings, facts)
        machine = settings.machine_settings(probe_supported=policy.probe_supported)
        step, result = record_step(record, obs, machine, self.shared.calls.outcome(name))
        return await self._execute(record, step, claim, policy, run, result=result)

    async def _begin(
        self,
        ours: OurResult,
        claim: ResourceClaim,
        all_ours: Sequence[OurResult],
        pods: Sequence[Pod],
        run: Run,
    ) -> Result | None:
        allocation = claim.status.allocation
        assert allocation is not None
        assert allocation.allocation_timestamp is not None
        if self.shared.cache.records.get(would_be_name(claim, ours)) is not None:
            return None
        policy = self.shared.cache.policies.owner(ours.result.driver)
        if policy is None or policy.settings is None or policy.action is None or not policy.ready:
            return None
        settings = policy.settings
        stamp = allocation.allocation_timestamp
        would_be = new_record(
            claim=claim,
            result=ours.result,
            allocation_timestamp=stamp,
            policy_name=policy.name,
            policy_uid=policy.uid,
            policy_generation=policy.generation,
            deadline=settings.attach_deadline(stamp),
            namespace=self.shared.settings.namespace,
            status=DeviceAttachmentStatus(),
        )
        facts = RuntimeFacts(
            now=utcnow(),
            pods=pods,
            slot_free=self.shared.calls.slot_free(policy.name, settings.spec.concurrency.max_attaches),
        )
        obs = observe_result(
            claim, ours, all_ours, self.shared.cache.records, settings, facts, would_be=would_be
        )
        step = start(obs, settings.machine_settings(probe_supported=policy.probe_supported))
        if step is None:
            return None
        return await self._execute(would_be, step, claim, policy, run, create=True)

    async def _execute(
        self,
        record: DeviceAttachment,
        step: Step,
        claim: ResourceClaim | None,
        policy: PolicyState,
        run: Run,
        *,
        create: bool = False,
        result: CallResult | None = None,
    ) -> Result | None:
        """Persist the step's record (readiness waits for the claim write), then its effects."""
        name = record.metadata.name
        updated = ledger.with_node(record, step.node) if step.node is not None else record
        updated = updated.model_copy(update={"status": step.status})
        if step.report_first and not create:
            run.readiness[name] = Readiness(record, updated, step, policy, result)
            return None
        if Effect.DELETE_RECORD in step.effects:
            self.shared.calls.cancel(name)
            if stop := await self.shared.kube.ledger.finish(updated):
                return stop
            _count_detach(updated, forgotten=Event.ATTACHMENT_FORGOTTEN in step.events)
        elif create or updated != record:
            writer = self.shared.kube.ledger
            written = await (writer.create if create else writer.update)(updated)
            if isinstance(written, Requeue):
                return written
            updated = written
        await self._persisted(record, updated, step, claim, policy, run, result)
        return None

    async def _persisted(
        self,
        record: DeviceAttachment,
        updated: DeviceAttachment,
        step: Step,
        claim: ResourceClaim | None,
        policy: PolicyState,
        run: Run,
        result: CallResult | None,
    ) -> None:
        """The effects that follow once the step's record write is durable."""
        name = record.metadata.name
        deleting = Effect.DELETE_RECORD in step.effects
        self.shared.calls.settle(name, record.status.phase, step, result)
        if deleting:
            self.shared.calls.forget(name)
        elif Effect.CANCEL_CALL in step.effects:
            self.shared.calls.cancel(name)
        for effect, operation in _CALLS.items():
            if effect in step.effects and not deleting:
                self._start_call(updated, operation, claim, policy, run.key)
        if Effect.TAINT_DEVICE in step.effects and policy.settings is not None and step.status.failure:
            await self.shared.kube.taints.taint(
                DeviceKey.of_record(updated).device,
                step.status.failure.reason,
                policy.name,
                policy.settings.taint_duration,
            )
        _count_outcome(updated, step)
        for event in self.shared.calls.throttled(name, step.events):
            run.events.append((event, updated, step.message))
        self._streak(updated, step, policy, run)
        if step.requeue_after is not None:
            run.requeue(step.requeue_after)
        if step.message and step.status.phase is record.status.phase and not step.events:
            log.debug("%s: %s", name, step.message)

    def _start_call(
        self,
        record: DeviceAttachment,
        operation: Operation,
        claim: ResourceClaim | None,
        policy: PolicyState,
        key: Key,
    ) -> None:
        async def call() -> CallOutcome:
            return await run_call(
                self.shared.kube.lookups,
                record,
                operation,
                claim,
                policy,
                with_test_annotations=self.shared.settings.enable_test_actions,
            )

        self.shared.calls.start(
            record.metadata.name,
            operation,
            policy.name,
            record.spec.driver,
            call,
            lambda: self.shared.queue.add(key),
        )

    def _streak(self, record: DeviceAttachment, step: Step, policy: PolicyState, run: Run) -> None:
        """Make a claim that keeps failing on one device visible (Warning Event and metric)."""
        if step.outcome is None:
            return
        claim_uid, device = record.spec.claim.uid, DeviceKey.of_record(record)
        if step.outcome is AttachmentOutcome.READY:
            self.streaks.succeeded(claim_uid, device)
            return
        if step.outcome not in _STREAK_OUTCOMES:
            return
        rounds = self.streaks.failed(claim_uid, device)
        if rounds is None:
            return
        metrics.repeated_failures.labels(driver=record.spec.driver).inc()
        settings = policy.settings
        taint = settings.spec.on_failure.taint_device.value if settings is not None else "unknown"
        run.events.append(
            (
                Event.REPEATED_FAILURE,
                record,
                f"{rounds} allocation rounds in a row failed on this device (policy {policy.name}, "
                f"onFailure.taintDevice: {taint}); a taint would let the scheduler pick another device",
            )
        )

    # -- claim status ------------------------------------------------------------------------------

    async def _write_statuses(self, claim: ResourceClaim, run: Run) -> ResourceClaim | Result:
        by_driver: dict[str, list[DeviceAttachment]] = {}
        for record in self.shared.cache.records.for_claim(claim.metadata.uid):
            readiness = run.readiness.get(record.metadata.name)
            record = readiness.updated if readiness is not None else record
            by_driver.setdefault(record.spec.driver, []).append(record)
        now = utcnow()
        held = self.shared.calls.just_started(PROGRESS_GRACE_SECONDS)
        for driver, records in sorted(by_driver.items()):
            policy = self.shared.cache.policies.for_record(records[0])
            if policy is None or policy.settings is None:
                continue
            conditions = policy.settings.condition_settings(policy.name)
            entries = desired_entries(claim, records, conditions, now, hold_progress=held)
            if any(r.metadata.name in held for r in records):
                run.requeue(PROGRESS_GRACE_SECONDS)
            if entries and needs_write(claim, entries):
                failure_types = frozenset(t for r in records for t in conditions.failure_types(r))
                kind = write_kind(entries, failure_types)
                try:
                    claim = await self.shared.kube.claims.apply(claim, driver, entries, kind)
                except StatusWriteError as err:
                    return await self._rejected(claim, driver, err, run)
                self._allowed(driver)
            written = {DeviceKey.of_entry(e) for e in entries}
            for record in records:
                if DeviceKey.of_record(record) in written and write_precondition(claim, record):
                    expected = expected_reported(record, conditions.spec.report_progress)
                    readiness = run.readiness.get(record.metadata.name)
                    if readiness is not None:
                        stop = await self._persist_readiness(readiness, expected, claim, run)
                    else:
                        stop = await self._reported(record, expected, claim)
                    if stop:
                        return stop
        return claim

    async def _persist_readiness(
        self, readiness: Readiness, reported: Reported | None, claim: ResourceClaim | None, run: Run
    ) -> Result | None:
        """Write a readiness step's record, with what the claim now shows when it was written."""
        updated = readiness.updated
        if reported is not None and reported is not updated.status.reported:
            if reported is Reported.READY and claim is not None:
                _observe_time_to_ready(updated, claim)
            updated = updated.model_copy(
                update={"status": updated.status.model_copy(update={"reported": reported})}
            )
        written = await self.shared.kube.ledger.update(updated)
        if isinstance(written, Requeue):
            return written
        run.readiness.pop(written.metadata.name, None)
        await self._persisted(
            readiness.before, written, readiness.step, claim, readiness.policy, run, readiness.result
        )
        return None

    async def _reported(
        self, record: DeviceAttachment, expected: Reported | None, claim: ResourceClaim
    ) -> Result | None:
        """Remember in the record what the claim now shows for it."""
        current = self.shared.cache.records.get(record.metadata.name) or record
        # Progress is not persisted: no decision depends on it (spec §11.3 allows batching it
        # with the next transition, which then records what it writes itself).
        if expected is None or expected is Reported.PROGRESS or current.status.reported is expected:
            return None
        if expected is Reported.READY:
            _observe_time_to_ready(current, claim)
        status = current.status.model_copy(update={"reported": expected})
        written = await self.shared.kube.ledger.update(current.model_copy(update={"status": status}))
        return written if isinstance(written, Requeue) else None

    async def _rejected(self, claim: ResourceClaim, driver: str, err: StatusWriteError, run: Run) -> Result:
        """The result of a refused apply (spec §11.3); the Events collected so far are posted."""
        meta = claim.metadata
        uid = meta.uid
        await self._post_events(run, claim)
        match err.kind:
            case WriteError.CONFLICT | WriteError.NOT_ALLOCATED | WriteError.NOT_FOUND:
                await self.shared.kube.claims.read(meta.namespace, meta.name, uid)
                count = self._conflicts[uid] = self._conflicts.get(uid, 0) + 1
                if count < CONFLICTS_BEFORE_BACKOFF:
                    return Requeue(0.0, f"claim changed under the status write ({err.kind.value})")
                raise err.error
            case WriteError.FORBIDDEN:
                owner = self.shared.cache.policies.owner(driver)
                await self._tell_refusal(claim, driver, err, owner)
                if owner is not None:
                    owner.recheck_authorization()
                    self.shared.queue.add(policy_key(owner.name))
                return Requeue(FORBIDDEN_RETRY_SECONDS, f"status write forbidden: {err.error.message}")
            case WriteError.INVALID:
                count = self._invalid[uid] = self._invalid.get(uid, 0) + 1
                log.error(
                    "the API server rejected the status entries of driver %s as invalid: %s",
                    driver,
                    err.error.message,
                    extra={"object": f"resourceclaim {meta.namespace}/{meta.name}"},
                )
                await self._tell_refusal(claim, driver, err)
                return Requeue(min(INVALID_MAX_BACKOFF_SECONDS, 2.0**count), "invalid status write")
            case _:
                raise err.error

    async def _tell_refusal(
        self, claim: ResourceClaim, driver: str, err: StatusWriteError, owner: PolicyState | None = None
    ) -> None:
        """The Events of a refused status write; ``owner``, the driver's policy, hears of a
        missing permission."""
        owner_ref = policy_ref(owner) if owner is not None else None
        await execute(Plan(refusal_events(claim, driver, err.kind, err.error, owner_ref)), self.shared)

    def _allowed(self, driver: str) -> None:
        """A status write succeeded for a driver whose policy says Authorized=False: the
        permission was restored, so the policy is re-checked now, not at its 5-minute recheck."""
        owner = self.shared.cache.policies.owner(driver)
        if owner is not None and owner.authorized is False:
            owner.recheck_authorization()
            self.shared.queue.add(policy_key(owner.name))

    # -- Events ------------------------------------------------------------------------------------

    async def _post_events(self, run: Run, claim: ResourceClaim | None) -> None:
        """Queue the Events collected during the sync (once; Events are diagnostics)."""
        pending, run.events = run.events, []
        await execute(event_plan(pending, claim, self.shared.settings.max_pod_events), self.shared)


# -- metrics ---------------------------------------------------------------------------------------


def _observe_time_to_ready(record: DeviceAttachment, claim: ResourceClaim) -> None:
    allocation = claim.status.allocation
    if record.status.adopted or allocation is None or allocation.allocation_timestamp is None:
        return
    waited = (utcnow() - allocation.allocation_timestamp).total_seconds()
    metrics.time_to_ready.labels(driver=record.spec.driver).observe(max(waited, 0.0))


def _count_outcome(record: DeviceAttachment, step: Step) -> None:
    driver = record.spec.driver
    if step.outcome is not None:
        metrics.attachments.labels(driver=driver, outcome=step.outcome.value).inc()
        created = record.metadata.creation_timestamp
        if created:
            took = max((utcnow() - parse_time(created)).total_seconds(), 0.0)
            metrics.attach_duration.labels(driver=driver, outcome=step.outcome.value).observe(took)
        if step.outcome is AttachmentOutcome.ABANDONED:
            metrics.abandoned.labels(driver=driver).inc()
    if step.budget_exhausted is not None:
        label = _WAITING_LABEL.get(step.budget_exhausted, "none")
        metrics.budget_exhausted.labels(driver=driver, waiting_for=label).inc()


def _count_detach(record: DeviceAttachment, *, forgotten: bool) -> None:
    reason = record.status.detach_reason.value if record.status.detach_reason else "None"
    if forgotten:
        metrics.detaches.labels(driver=record.spec.driver, reason=reason, outcome="forgotten").inc()
    elif record.status.phase is Phase.DETACHED and record.status.detach_attempts > 0:
        metrics.detaches.labels(driver=record.spec.driver, reason=reason, outcome="succeeded").inc()
