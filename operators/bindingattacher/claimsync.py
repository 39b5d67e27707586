"""Reconciling one claim: its results, its ledger records and its ``status.devices`` entries.

A sync is level-triggered. It reads the claim projection (or confirms with a live GET that
a claim its records refer to is gone), lets the state machine decide for every record of the
claim and for every result of ours that has no record yet, executes those steps
(:mod:`.steps_exec`), and finally applies, per driver, the entries the records call for, when
they differ from what the claim shows. Nothing is decided from memory alone: what only the
process knows (a call in flight, a backoff timer) enters as :class:`RuntimeFacts`.

Before anything is decided, every policy the claim depends on must have been evaluated at
its current generation (after a restart the policy watch and the claim watch race), and every
record must have an action instance to call; otherwise the sync is retried shortly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NoReturn

from operators.core.events import WARNING
from operators.core.reconcile import Interrupt, Requeue

from .actions import Outcome as CallOutcomeKind
from .cache import ClaimCache, ClaimKey
from .decide import RuntimeFacts, claim_ref, observe_record, observe_result, pods_needed
from .devicestatus import WriteError, desired_entries, needs_write, write_precondition
from .identity import AllocationIdentity, DeviceKey, attachment_key
from .kube import StatusWriteError, write_kind
from .ledger import LedgerIndex, new_record
from .models import (
    DeviceAttachment,
    DeviceAttachmentStatus,
    DeviceResult,
    Phase,
    Pod,
    Reported,
    ResourceClaim,
)
from .policy import PolicyBook
from .selection import (
    OurResult,
    SelectionRules,
    foreign_failure,
    own_failure_shown,
    pod_consumers,
    select,
)
from .statemachine import CallResult, advance, after_attach, after_detach, start
from .steps_exec import Plan, StepExecutor

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


def utcnow() -> datetime:
    return datetime.now(UTC)


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


class ClaimSync:
    def __init__(
        self,
        cache: ClaimCache,
        index: LedgerIndex,
        book: PolicyBook,
        executor: StepExecutor,
        namespace: str,
    ) -> None:
        self.cache = cache
        self.index = index
        self.book = book
        self.executor = executor
        self.namespace = namespace
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

    async def sync(self, key: ClaimKey) -> None:
        claim = self.cache.get(key.uid)
        records = self.index.for_claim(key.uid)
        if claim is None and not records:
            self.forget_claim(key.uid)
            return
        if claim is None:
            claim = await self.executor.writer.read(key.namespace, key.name, key.uid)
        drivers = {r.spec.driver for r in records}
        if claim is not None and claim.status.allocation is not None:
            drivers |= {r.driver for r in claim.status.allocation.devices.results}
        if not self.book.settled(drivers):
            raise Interrupt(Requeue(POLICIES_PENDING_RETRY_SECONDS, "waiting for the evaluation of a policy"))
        ours: tuple[OurResult, ...] = ()
        managed: tuple[OurResult, ...] = ()
        if claim is not None:
            rules = self.book.rules()
            selection = select(claim, rules)
            ours = selection.ours
            # Existing records are driven whether or not their policy is Ready now (spec §5), so
            # they are observed against every result of a configured driver.
            managed = select(claim, {d: replace(r, ready=True) for d, r in rules.items()}).ours
            await self._warn(claim, selection.missing_allocation_timestamp, selection.blocked_by_policy)
            self._remember_failures(claim, managed)
        plan = Plan(key=key)
        pods = await self._pods(claim, records, ours)
        for record in records:
            current = self.index.get(record.metadata.name)
            if current is not None:
                await self._drive(current, claim, managed, pods, plan)
        if claim is not None:
            for result in ours:
                await self._begin(result, claim, ours, pods, plan)
            claim = await self._write_statuses(claim, plan)
        for deferred in list(plan.deferred.values()):
            # Nothing of it could be written to the claim (e.g. the allocation changed meanwhile).
            await self.executor.persist_deferred(deferred, None, claim, plan)
        await self.executor.finish(plan, claim)
        if plan.requeue_after is not None:
            self.executor.requeue(key, plan.requeue_after)
        self._conflicts.pop(key.uid, None)
        self._invalid.pop(key.uid, None)

    # -- facts -------------------------------------------------------------------------------------

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
        deadlines = [
            self._deadline(claim, o, now) for o in ours if self._would_be_name(claim, o) not in known
        ]
        unsuccessful = set()
        for record in records:
            finished = self.executor.calls.outcome(record.metadata.name)
            if finished is not None and finished[1].result.outcome is not CallOutcomeKind.SUCCEEDED:
                unsuccessful.add(record.metadata.name)
        if not pods_needed(claim, records, deadlines, unsuccessful, now):
            return []
        return await self.executor.lookups.pods(claim.metadata.namespace or "", pod_consumers(claim))

    def _deadline(self, claim: ResourceClaim, ours: OurResult, now: datetime) -> datetime:
        """The attach deadline a new record would get (now when unknown, which reads the pods)."""
        policy = self.book.owner(ours.result.driver)
        allocation = claim.status.allocation
        if (
            policy is None
            or policy.settings is None
            or allocation is None
            or not allocation.allocation_timestamp
        ):
            return now
        return policy.settings.attach_deadline(allocation.allocation_timestamp)

    @staticmethod
    def _would_be_name(claim: ResourceClaim, ours: OurResult) -> str:
        allocation = claim.status.allocation
        assert allocation is not None
        assert allocation.allocation_timestamp is not None
        identity = AllocationIdentity.of(claim.metadata.uid, allocation.allocation_timestamp)
        return attachment_key(identity, ours.key)

    # -- records -----------------------------------------------------------------------------------

    async def _drive(
        self,
        record: DeviceAttachment,
        claim: ResourceClaim | None,
        ours: Sequence[OurResult],
        pods: Sequence[Pod],
        plan: Plan,
    ) -> None:
        policy = self.book.for_record(record)
        if policy is None or policy.settings is None:
            log.info(
                "record %s waits for an accepted policy for driver %s",
                record.metadata.name,
                record.spec.driver,
                extra={"object": f"deviceattachment {record.metadata.name}"},
            )
            plan.requeue(NO_ACTION_RETRY_SECONDS)
            return
        settings = policy.settings
        machine = settings.machine_settings(probe_supported=policy.probe_supported)
        name = record.metadata.name
        runtime = self.executor.calls.runtime(name)
        facts = RuntimeFacts(
            now=utcnow(),
            pods=pods,
            call_in_flight=self.executor.calls.in_flight(name),
            retry_at=runtime.retry_at,
            last_in_progress=runtime.last_in_progress,
            retries=runtime.retries,
            slot_free=self.executor.calls.slot_free(policy.name, settings.spec.concurrency.max_attaches),
            failure_shown=self._failure_shown(record),
        )
        obs = observe_record(record, claim, ours, self.index, settings, facts)
        finished = self.executor.calls.outcome(name)
        if finished is None:
            step = advance(record.status, obs, machine)
            result = None
        else:
            operation, outcome = finished
            result = CallResult(outcome.result.outcome.value)
            if operation.value == "Detach":
                step = after_detach(record.status, obs, machine, result, message=outcome.result.message)
            else:
                step = after_attach(
                    record.status,
                    obs,
                    machine,
                    result,
                    message=outcome.result.message,
                    data=dict(outcome.result.data) if outcome.result.data is not None else None,
                    retry_after_seconds=outcome.result.retry_after_seconds,
                )
        await self.executor.execute(record, step, claim, policy, plan, result=result)

    async def _begin(
        self,
        ours: OurResult,
        claim: ResourceClaim,
        all_ours: Sequence[OurResult],
        pods: Sequence[Pod],
        plan: Plan,
    ) -> None:
        allocation = claim.status.allocation
        assert allocation is not None
        assert allocation.allocation_timestamp is not None
        if self.index.get(self._would_be_name(claim, ours)) is not None:
            return
        policy = self.book.owner(ours.result.driver)
        if policy is None or policy.settings is None or policy.action is None or not policy.ready:
            return
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
            namespace=self.namespace,
            status=DeviceAttachmentStatus(),
        )
        facts = RuntimeFacts(
            now=utcnow(),
            pods=pods,
            slot_free=self.executor.calls.slot_free(policy.name, settings.spec.concurrency.max_attaches),
        )
        obs = observe_result(claim, ours, all_ours, self.index, settings, facts, would_be=would_be)
        step = start(obs, settings.machine_settings(probe_supported=policy.probe_supported))
        if step is not None:
            await self.executor.execute(would_be, step, claim, policy, plan, create=True)

    # -- claim status ---------------------------------------------------------------------------

    async def _write_statuses(self, claim: ResourceClaim, plan: Plan) -> ResourceClaim:
        by_driver: dict[str, list[DeviceAttachment]] = {}
        for record in self.index.for_claim(claim.metadata.uid):
            deferred = plan.deferred.get(record.metadata.name)
            record = deferred.updated if deferred is not None else record
            by_driver.setdefault(record.spec.driver, []).append(record)
        now = utcnow()
        held = self.executor.calls.just_started(PROGRESS_GRACE_SECONDS)
        for driver, records in sorted(by_driver.items()):
            policy = self.book.for_record(records[0])
            if policy is None or policy.settings is None:
                continue
            conditions = policy.settings.condition_settings(policy.name)
            entries = desired_entries(claim, records, conditions, now, hold_progress=held)
            if any(r.metadata.name in held for r in records):
                plan.requeue(PROGRESS_GRACE_SECONDS)
            if entries and needs_write(claim, entries):
                failure_types = frozenset(t for r in records for t in conditions.failure_types(r))
                kind = write_kind(entries, failure_types)
                try:
                    claim = await self.executor.writer.apply(claim, driver, entries, kind)
                except StatusWriteError as err:
                    await self._rejected(claim, driver, err, plan)
                self.executor.on_allowed(driver)
            written = {_entry_key(e) for e in entries}
            for record in records:
                if DeviceKey.of_record(record) in written and write_precondition(claim, record):
                    expected = expected_reported(record, conditions.spec.report_progress)
                    deferred = plan.deferred.get(record.metadata.name)
                    if deferred is not None:
                        await self.executor.persist_deferred(deferred, expected, claim, plan)
                    else:
                        await self.executor.reported(record, expected, claim)
        return claim

    async def _rejected(
        self, claim: ResourceClaim, driver: str, err: StatusWriteError, plan: Plan
    ) -> NoReturn:
        """Handle a refused apply (spec §11.3); always ends the sync by raising."""
        meta = claim.metadata
        uid = meta.uid
        await self.executor.finish(plan, claim)
        match err.kind:
            case WriteError.CONFLICT | WriteError.NOT_ALLOCATED | WriteError.NOT_FOUND:
                await self.executor.writer.read(meta.namespace or "", meta.name, uid)
                count = self._conflicts[uid] = self._conflicts.get(uid, 0) + 1
                if count < CONFLICTS_BEFORE_BACKOFF:
                    raise Interrupt(
                        Requeue(0.0, f"claim changed under the status write ({err.kind.value})")
                    ) from err
                raise err.error
            case WriteError.FORBIDDEN:
                await self.executor.forbidden(claim, driver, err.error)
                raise Interrupt(
                    Requeue(FORBIDDEN_RETRY_SECONDS, f"status write forbidden: {err.error.message}")
                ) from err
            case WriteError.INVALID:
                count = self._invalid[uid] = self._invalid.get(uid, 0) + 1
                log.error(
                    "the API server rejected the status entries of driver %s as invalid: %s",
                    driver,
                    err.error.message,
                    extra={"object": f"resourceclaim {meta.namespace}/{meta.name}"},
                )
                self.executor.events.record(
                    claim_ref(claim), WARNING, "StatusWriteInvalid", err.error.message[:1024]
                )
                raise Interrupt(
                    Requeue(min(INVALID_MAX_BACKOFF_SECONDS, 2.0**count), "invalid status write")
                ) from err
            case _:
                raise err.error

    # -- warnings ------------------------------------------------------------------------------------

    async def _warn(
        self,
        claim: ResourceClaim,
        missing_timestamp: bool,
        blocked: Sequence[tuple[DeviceResult, SelectionRules]],
    ) -> None:
        allocation = claim.status.allocation
        if allocation is None:
            return
        uid = claim.metadata.uid
        stamp = allocation.allocation_timestamp.isoformat() if allocation.allocation_timestamp else "-"
        warned = self._warned.setdefault(uid, set())
        if missing_timestamp and (stamp, "") not in warned:
            warned.add((stamp, ""))
            self.executor.events.record(
                claim_ref(claim),
                WARNING,
                "MissingAllocationTimestamp",
                "the allocation has no allocationTimestamp (not made by a kube-scheduler with binding "
                "conditions enabled); its devices are not attached",
            )
        for result, rules in blocked:
            if (stamp, rules.driver) in warned:
                continue
            warned.add((stamp, rules.driver))
            self.executor.events.record(
                claim_ref(claim),
                WARNING,
                "AttachPolicyNotReady",
                f"device {DeviceKey.of_result(result)} is not attached: the DeviceAttachPolicy for driver "
                f"{rules.driver} is not Ready: {rules.not_ready_message}",
            )


def _entry_key(entry: Mapping[str, Any]) -> DeviceKey:
    return DeviceKey(entry["driver"], entry["pool"], entry["device"], entry.get("shareID") or "")
