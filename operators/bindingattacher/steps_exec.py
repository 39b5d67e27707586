"""Executing a state-machine :class:`~.steps.Step`: the I/O behind each effect.

Order (as :mod:`.statemachine` requires): persist the record first (create, update, or the
final update plus delete), then cancel and start action calls, then ask for the claim status
write (done per driver at the end of the sync), then Events and metrics. Persisting first
makes the record an intent log: a call is never started that the ledger does not know of.

The one exception is readiness (``Step.report_first``): the step is parked in the
:class:`Plan` and its record is written after the claim's readiness apply, in one update that
also records ``reported: Ready``, so the scheduler's wait is one ledger write shorter and the
attachment costs one record update instead of two.

A call outcome that produced the step is consumed only after the record was persisted, so a
failed ledger write leaves the outcome in place for the retried sync. Events are queued
(``EventRecorder.record``), never awaited by the sync.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from operators.core.client import ApiError
from operators.core.conditions import parse_time
from operators.core.events import WARNING, EventRecorder
from operators.core.workqueue import WorkQueue

from . import decide, ledger, metrics
from .actions import CallOutcome, Operation, invoke
from .cache import ClaimKey
from .calls import CallTracker, build_request
from .decide import FailureStreaks
from .identity import DeviceKey
from .kube import LedgerWriter, Lookups, StatusWriter, TaintRules
from .models import DeviceAttachment, Phase, Reported, ResourceClaim, WaitingFor
from .policy import PolicyState
from .policysync import policy_ref
from .statemachine import CallResult, Effect, Event, Outcome, Step, attach_call_timeout

log = logging.getLogger(__name__)

MIN_REQUEUE_SECONDS = 0.05
RETRY_EVENT_SECONDS = 60.0
DETACH_FAILED_EVENT_SECONDS = 3600.0
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


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Deferred:
    """A step whose record write waits for the claim write (``Step.report_first``)."""

    before: DeviceAttachment
    updated: DeviceAttachment
    step: Step
    policy: PolicyState
    result: CallResult | None


_STREAK_OUTCOMES = frozenset({Outcome.FAILED, Outcome.TIMEOUT, Outcome.NODE_NOT_DETERMINED})


@dataclass
class Plan:
    """What one claim sync collected while executing steps."""

    key: ClaimKey
    requeue_after: float | None = None
    events: list[tuple[Event, DeviceAttachment, str]] = field(default_factory=list)
    deferred: dict[str, Deferred] = field(default_factory=dict)
    """Record name -> its not yet persisted step."""

    def requeue(self, after: float) -> None:
        after = max(after, MIN_REQUEUE_SECONDS)
        self.requeue_after = after if self.requeue_after is None else min(self.requeue_after, after)


class StepExecutor:
    def __init__(
        self,
        *,
        ledger_writer: LedgerWriter,
        writer: StatusWriter,
        lookups: Lookups,
        calls: CallTracker,
        events: EventRecorder,
        taints: TaintRules,
        queue: WorkQueue[object],
        max_pod_events: int,
        test_actions: bool,
        on_forbidden: Callable[[str], None],
        on_allowed: Callable[[str], None],
    ) -> None:
        self.ledger = ledger_writer
        self.writer = writer
        self.lookups = lookups
        self.calls = calls
        self.events = events
        self.taints = taints
        self.queue = queue
        self.max_pod_events = max_pod_events
        self.test_actions = test_actions
        self.on_forbidden = on_forbidden
        self.on_allowed = on_allowed
        self.streaks = FailureStreaks()

    def requeue(self, key: ClaimKey, after: float) -> None:
        self.queue.add_after(key, max(after, MIN_REQUEUE_SECONDS))

    async def execute(
        self,
        record: DeviceAttachment,
        step: Step,
        claim: ResourceClaim | None,
        policy: PolicyState,
        plan: Plan,
        *,
        create: bool = False,
        result: CallResult | None = None,
    ) -> None:
        name = record.metadata.name
        updated = ledger.with_node(record, step.node) if step.node is not None else record
        updated = updated.model_copy(update={"status": step.status})
        if step.report_first and not create:
            plan.deferred[name] = Deferred(record, updated, step, policy, result)
            return
        deleting = Effect.DELETE_RECORD in step.effects
        if deleting:
            self.calls.cancel(name)
            await self.ledger.finish(updated)
            self._count_detach(updated, forgotten=Event.ATTACHMENT_FORGOTTEN in step.events)
        elif create:
            updated = await self.ledger.create(updated)
        elif updated != record:
            updated = await self.ledger.update(updated)
        await self._persisted(record, updated, step, claim, policy, plan, result)

    async def persist_deferred(
        self, deferred: Deferred, reported: Reported | None, claim: ResourceClaim | None, plan: Plan
    ) -> None:
        """Write a deferred step's record, with what the claim now shows when it was written."""
        updated = deferred.updated
        if reported is not None and reported is not updated.status.reported:
            if reported is Reported.READY and claim is not None:
                self._observe_time_to_ready(updated, claim)
            updated = updated.model_copy(
                update={"status": updated.status.model_copy(update={"reported": reported})}
            )
        updated = await self.ledger.update(updated)
        plan.deferred.pop(updated.metadata.name, None)
        await self._persisted(
            deferred.before, updated, deferred.step, claim, deferred.policy, plan, deferred.result
        )

    async def _persisted(
        self,
        record: DeviceAttachment,
        updated: DeviceAttachment,
        step: Step,
        claim: ResourceClaim | None,
        policy: PolicyState,
        plan: Plan,
        result: CallResult | None,
    ) -> None:
        """The effects that follow once the step's record write is durable."""
        name = record.metadata.name
        deleting = Effect.DELETE_RECORD in step.effects
        self._runtime_after(name, record, step, result)
        if deleting:
            self.calls.forget(name)
        elif Effect.CANCEL_CALL in step.effects:
            self.calls.cancel(name)
        for effect, operation in _CALLS.items():
            if effect in step.effects and not deleting:
                self._start_call(updated, operation, claim, policy, plan.key)
        if Effect.TAINT_DEVICE in step.effects and policy.settings is not None and step.status.failure:
            await self.taints.taint(
                DeviceKey.of_record(updated),
                step.status.failure.reason,
                policy.name,
                policy.settings.taint_duration,
            )
        self._count_outcome(updated, step)
        for event in self._throttled(name, step.events):
            plan.events.append((event, updated, step.message))
        self._streak(updated, step, policy, plan)
        if step.requeue_after is not None:
            plan.requeue(step.requeue_after)
        if step.message and step.status.phase is record.status.phase and not step.events:
            log.debug("%s: %s", name, step.message)

    def _runtime_after(
        self, name: str, before: DeviceAttachment, step: Step, result: CallResult | None
    ) -> None:
        runtime = self.calls.runtime(name)
        if result is not None:
            self.calls.consume(name)
        if step.status.phase is not before.status.phase:
            runtime.retries = 0
            runtime.retry_at = None
            runtime.last_in_progress = False
        elif result is not None and result is not CallResult.SUCCEEDED and step.requeue_after is not None:
            runtime.retries += 1
            runtime.retry_at = utcnow() + timedelta(seconds=step.requeue_after)
            runtime.last_in_progress = result is CallResult.IN_PROGRESS

    def _throttled(self, name: str, events: tuple[Event, ...]) -> list[Event]:
        runtime = self.calls.runtime(name)
        now = time.monotonic()
        kept = []
        for event in events:
            if event is Event.ATTACH_RETRYING:
                if now - runtime.last_retry_event < RETRY_EVENT_SECONDS:
                    continue
                runtime.last_retry_event = now
            if event is Event.DETACH_FAILED:
                if now - runtime.last_detach_failed_event < DETACH_FAILED_EVENT_SECONDS:
                    continue
                runtime.last_detach_failed_event = now
            kept.append(event)
        return kept

    # -- calls -----------------------------------------------------------------------------------

    def _start_call(
        self,
        record: DeviceAttachment,
        operation: Operation,
        claim: ResourceClaim | None,
        policy: PolicyState,
        key: ClaimKey,
    ) -> None:
        async def call() -> CallOutcome:
            return await self._call(record, operation, claim, policy)

        def done() -> None:
            self.queue.add(key)

        self.calls.start(record.metadata.name, operation, policy.name, record.spec.driver, call, done)

    async def _call(
        self, record: DeviceAttachment, operation: Operation, claim: ResourceClaim | None, policy: PolicyState
    ) -> CallOutcome:
        settings = policy.settings
        action = policy.action
        assert settings is not None
        assert action is not None
        node = await self.lookups.node(record.spec.node)
        spec = record.spec
        device = None
        if settings.spec.device_info:
            device = await self.lookups.device(spec.driver, spec.pool, spec.device)
        if operation is Operation.DETACH:
            grace = settings.detach_grace_period.total_seconds()
            if grace > 0:
                await asyncio.sleep(grace)
            timeout = settings.action_timeout.total_seconds()
        else:
            timeout = attach_call_timeout(settings.action_timeout, spec.deadline, utcnow())
        request = build_request(
            operation,
            record,
            timeout_seconds=timeout,
            claim=claim,
            node=node,
            device=device,
            policy_generation=policy.generation,
            with_test_annotations=self.test_actions,
        )
        outcome = await invoke(action, operation, request, timeout)
        labels = {"driver": spec.driver, "action_kind": policy.action_kind, "operation": operation.lower()}
        metrics.action_calls.labels(**labels, result=outcome.metric_result).inc()
        metrics.action_call_duration.labels(**labels).observe(outcome.duration_seconds)
        for warning in outcome.warnings:
            log.warning("%s: %s", record.metadata.name, warning)
        log.info(
            "%s %s of %s: %s %s",
            operation.lower(),
            record.metadata.name,
            DeviceKey.of_record(record),
            outcome.result.outcome.value,
            outcome.result.message,
            extra={"object": f"claim {spec.claim.namespace}/{spec.claim.name}"},
        )
        return outcome

    # -- claim status side -------------------------------------------------------------------------

    async def reported(
        self, record: DeviceAttachment, expected: Reported | None, claim: ResourceClaim
    ) -> None:
        """Remember in the record what the claim now shows for it."""
        current = self.ledger.index.get(record.metadata.name) or record
        # Progress is not persisted: no decision depends on it (spec §11.3 allows batching it
        # with the next transition, which then records what it writes itself).
        if expected is None or expected is Reported.PROGRESS or current.status.reported is expected:
            return
        if expected is Reported.READY:
            self._observe_time_to_ready(current, claim)
        status = current.status.model_copy(update={"reported": expected})
        await self.ledger.update(current.model_copy(update={"status": status}))

    @staticmethod
    def _observe_time_to_ready(record: DeviceAttachment, claim: ResourceClaim) -> None:
        allocation = claim.status.allocation
        if record.status.adopted or allocation is None or allocation.allocation_timestamp is None:
            return
        waited = (utcnow() - allocation.allocation_timestamp).total_seconds()
        metrics.time_to_ready.labels(driver=record.spec.driver).observe(max(waited, 0.0))

    async def forbidden(self, claim: ResourceClaim, driver: str, err: ApiError) -> None:
        message = f"status.devices entries of driver {driver} were refused ({err.status}): {err.message}"
        self.events.record(decide.claim_ref(claim), WARNING, "StatusWriteForbidden", message[:1024])
        self.on_forbidden(driver)

    async def policy_event(self, policy: PolicyState, reason: str, message: str) -> None:
        self.events.record(policy_ref(policy), WARNING, reason, message[:1024])

    async def finish(self, plan: Plan, claim: ResourceClaim | None) -> None:
        """Post the Events collected during the sync (once; Events are diagnostics)."""
        pending, plan.events = plan.events, []
        for event, record, detail in pending:
            text = decide.message(event, record, detail)
            for target in decide.targets(event, record, claim, self.max_pod_events):
                self.events.record(target, decide.event_type(event), event.value, text[:1024])

    def _streak(self, record: DeviceAttachment, step: Step, policy: PolicyState, plan: Plan) -> None:
        """Make a claim that keeps failing on one device visible (Warning Event and metric)."""
        if step.outcome is None:
            return
        claim_uid, device = record.spec.claim.uid, DeviceKey.of_record(record)
        if step.outcome is Outcome.READY:
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
        plan.events.append(
            (
                Event.REPEATED_FAILURE,
                record,
                f"{rounds} allocation rounds in a row failed on this device (policy {policy.name}, "
                f"onFailure.taintDevice: {taint}); a taint would let the scheduler pick another device",
            )
        )

    # -- metrics -------------------------------------------------------------------------------------

    def _count_outcome(self, record: DeviceAttachment, step: Step) -> None:
        driver = record.spec.driver
        if step.outcome is not None:
            metrics.attachments.labels(driver=driver, outcome=step.outcome.value).inc()
            created = record.metadata.creation_timestamp
            if created:
                took = max((utcnow() - parse_time(created)).total_seconds(), 0.0)
                metrics.attach_duration.labels(driver=driver, outcome=step.outcome.value).observe(took)
            if step.outcome is Outcome.ABANDONED:
                metrics.abandoned.labels(driver=driver).inc()
        if step.budget_exhausted is not None:
            label = _WAITING_LABEL.get(step.budget_exhausted, "none")
            metrics.budget_exhausted.labels(driver=driver, waiting_for=label).inc()

    @staticmethod
    def _count_detach(record: DeviceAttachment, *, forgotten: bool) -> None:
        reason = record.status.detach_reason.value if record.status.detach_reason else "None"
        if forgotten:
            metrics.detaches.labels(driver=record.spec.driver, reason=reason, outcome="forgotten").inc()
        elif record.status.phase is Phase.DETACHED and record.status.detach_attempts > 0:
            metrics.detaches.labels(driver=record.spec.driver, reason=reason, outcome="succeeded").inc()
