"""Action calls of a claim sync: the request handed to an action, the call, and the calls in flight.

:func:`build_request` assembles the :class:`~.actions.base.AttachRequest` (spec §10.2) from the
ledger record (identity, device, node, previous data), the claim (generation, consumers), the
Node object (provider ID, system UUID, labels) and, when the policy enables ``deviceInfo``, the
device as currently published in the driver's ResourceSlices (the pool's newest generation
only: older slices of a pool being republished may describe devices that no longer exist).
:func:`run_call` reads those objects, calls the action and counts and logs the outcome.

:class:`CallTracker` runs every call as its own task, never inside a reconcile worker: a worker
starts it and returns, and when the call ends its outcome is parked here and the claim is
queued again, so the state machine (``after_attach``/``after_detach``) sees the result on the
next sync. The outcome is only consumed (:meth:`CallTracker.consume`) after the step built from
it has been persisted, so a failed ledger write never loses a result. The tracker also keeps
the per-record facts only the running process knows: backoff, retries and when a repeated
Event was last posted.

Every call carries a ticket; cancelling a call, or starting another one for the same record,
makes the older ticket stale, and a stale call's late outcome is dropped. This is what
"cancel the in-flight call" means for a thread-backed Python action that cannot really be
stopped (spec §10.3).

Concurrency limits (spec §15.1): an attach or probe gets a slot (:meth:`CallTracker.slot_free`)
only while its policy runs fewer attaches and probes than ``maxAttaches`` and fewer calls than
``--max-actions-per-policy``, and the process fewer than ``--max-concurrent-actions``. Detaches
never wait for a slot, so they are never starved; they count towards the two call limits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from operators.core.conditions import time_after

from . import metrics
from .actions import AttachResult, CallOutcome, Outcome, invoke
from .actions.base import AttachRequest, ClaimRef, DeviceInfo, NodeInfo, Operation, PodRef, PolicyRef
from .actions.testaction import TEST_ANNOTATION_PREFIX
from .identity import DeviceKey, record_key
from .models import ActionDevice, DeviceAttachment, Node, Phase, ResourceClaim
from .policy import PolicyState
from .selection import pod_consumers
from .statemachine import CallResult, Event, Step, attach_call_timeout

if TYPE_CHECKING:
    from operators.core.runtime import Spawn

    from .kube import Lookups


def node_info(record: DeviceAttachment, node: Node | None) -> NodeInfo | None:
    if record.spec.node is None:
        return None
    source = record.spec.node_source.value if record.spec.node_source else ""
    if node is None:
        return NodeInfo(name=record.spec.node, source=source)
    return NodeInfo(
        name=record.spec.node,
        source=source,
        provider_id=node.spec.provider_id,
        system_uuid=node.status.node_info.system_uuid,
        labels=dict(node.metadata.labels),
    )


def claim_test_annotations(claim: ResourceClaim | None) -> Mapping[str, str]:
    if claim is None:
        return {}
    return {k: v for k, v in claim.metadata.annotations.items() if k.startswith(TEST_ANNOTATION_PREFIX)}


def build_request(
    operation: Operation,
    record: DeviceAttachment,
    *,
    timeout_seconds: float,
    claim: ResourceClaim | None = None,
    node: Node | None = None,
    device: ActionDevice | None = None,
    policy_generation: int | None = None,
    with_test_annotations: bool = False,
) -> AttachRequest:
    """``claim`` may be None for a detach after the claim is gone; ``device`` None means unknown."""
    spec = record.spec
    generation = claim.metadata.generation if claim is not None else 0
    consumers = tuple(
        PodRef(namespace=spec.claim.namespace, name=c.name, uid=c.uid)
        for c in (pod_consumers(claim) if claim is not None else ())
    )
    detach = operation is Operation.DETACH
    deadline: datetime | None = None if detach else spec.deadline
    return AttachRequest(
        operation=operation,
        attachment_key=record.metadata.name or record_key(record),
        attempt=record.status.detach_attempts if detach else max(record.status.attempts, 1),
        deadline=deadline,
        timeout_seconds=timeout_seconds,
        claim=ClaimRef(
            namespace=spec.claim.namespace,
            name=spec.claim.name,
            uid=spec.claim.uid,
            generation=generation,
            annotations=claim_test_annotations(claim) if with_test_annotations else {},
        ),
        allocation_timestamp=spec.allocation_timestamp,
        device=DeviceInfo(
            driver=spec.driver,
            pool=spec.pool,
            name=spec.device,
            share_id=spec.share_id,
            request=spec.request,
            admin_access=spec.admin_access,
            binding_conditions=spec.binding_conditions,
            binding_failure_conditions=spec.binding_failure_conditions,
            binds_to_node=device.binds_to_node if device is not None else None,
            attributes=device.attributes if device is not None else None,
            capacity=device.capacity if device is not None else None,
        ),
        node=node_info(record, node),
        consumers=consumers,
        policy=PolicyRef(
            name=spec.policy.name,
            generation=policy_generation if policy_generation is not None else spec.policy.generation,
        ),
        previous_data=record.status.data if operation is not Operation.ATTACH else None,
        detach_reason=record.status.detach_reason.value if detach and record.status.detach_reason else None,
    )


log = logging.getLogger(__name__)


@dataclass
class RecordRuntime:
    """In-memory facts about one ledger record (``RuntimeFacts`` is built from them)."""

    retry_at: datetime | None = None
    retries: int = 0
    last_in_progress: bool = False
    last_retry_event: float = float("-inf")
    last_detach_failed_event: float = float("-inf")


@dataclass
class _Call:
    ticket: int
    operation: Operation
    policy: str
    driver: str
    task: asyncio.Task[None] | None = None
    outcome: CallOutcome | None = None
    started: float = field(default_factory=time.monotonic)


RETRY_EVENT_SECONDS = 60.0
DETACH_FAILED_EVENT_SECONDS = 3600.0


class CallTracker:
    def __init__(self, max_total: int, spawn: Spawn, max_per_policy: int | None = None) -> None:
        self.max_total = max_total
        self.max_per_policy = max_per_policy or max_total
        self._spawn = spawn
        self._calls: dict[str, _Call] = {}
        self._runtime: dict[str, RecordRuntime] = {}
        self._tickets = itertools.count(1)

    def runtime(self, name: str) -> RecordRuntime:
        return self._runtime.setdefault(name, RecordRuntime())

    def in_flight(self, name: str) -> bool:
        call = self._calls.get(name)
        return call is not None and call.outcome is None and call.task is not None and not call.task.done()

    def just_started(self, within: float) -> frozenset[str]:
        """Records whose call is running and started less than ``within`` seconds ago."""
        now = time.monotonic()
        return frozenset(
            name
            for name, call in self._calls.items()
            if now - call.started < within
            and call.outcome is None
            and call.task is not None
            and not call.task.done()
        )

    def outcome(self, name: str) -> tuple[Operation, CallOutcome] | None:
        call = self._calls.get(name)
        if call is None or call.outcome is None:
            return None
        return call.operation, call.outcome

    def consume(self, name: str) -> None:
        call = self._calls.get(name)
        if call is not None and call.outcome is not None:
            del self._calls[name]

    def _running(self) -> list[_Call]:
        return [
            c for c in self._calls.values() if c.outcome is None and c.task is not None and not c.task.done()
        ]

    def slot_free(self, policy: str, max_attaches: int) -> bool:
        running = self._running()
        mine = [c for c in running if c.policy == policy]
        attaches = sum(1 for c in mine if c.operation is not Operation.DETACH)
        return attaches < max_attaches and len(mine) < self.max_per_policy and len(running) < self.max_total

    def start(
        self,
        name: str,
        operation: Operation,
        policy: str,
        driver: str,
        call: Callable[[], Coroutine[Any, Any, CallOutcome]],
        done: Callable[[], None],
    ) -> None:
        """Run ``call`` as a task; ``done`` is invoked (on the loop) once its outcome is parked."""
        self.cancel(name)
        entry = _Call(next(self._tickets), operation, policy, driver)
        self._calls[name] = entry
        self.runtime(name).retry_at = None

        async def run() -> None:
            try:
                outcome = await call()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a bug on our side of the call must not lose the record
                log.exception("action call %s for %s failed unexpectedly", operation, name)
                outcome = CallOutcome(AttachResult(Outcome.TRANSIENT_ERROR, f"{type(err).__name__}: {err}"))
            current = self._calls.get(name)
            if current is not None and current.ticket == entry.ticket:
                current.outcome = outcome
                done()

        entry.task = self._spawn(run(), f"call-{operation}-{name}")

    def cancel(self, name: str) -> None:
        call = self._calls.pop(name, None)
        if call is not None and call.task is not None and not call.task.done():
            call.task.cancel()

    def settle(self, name: str, before: Phase, step: Step, result: CallResult | None) -> None:
        """Update the record's runtime facts once ``step`` (built from ``result``, if any) is
        persisted: the outcome is consumed, and a retried call counts towards its backoff."""
        runtime = self.runtime(name)
        if result is not None:
            self.consume(name)
        if step.status.phase is not before:
            runtime.retries = 0
            runtime.retry_at = None
            runtime.last_in_progress = False
        elif result is not None and result is not CallResult.SUCCEEDED and step.requeue_after is not None:
            runtime.retries += 1
            runtime.retry_at = time_after(datetime.now(UTC), step.requeue_after)
            runtime.last_in_progress = result is CallResult.IN_PROGRESS

    def throttled(self, name: str, events: tuple[Event, ...]) -> list[Event]:
        """``events`` without the repeated retry and detach-failure Events of one record."""
        runtime = self.runtime(name)
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

    def forget(self, name: str) -> None:
        self.cancel(name)
        self._runtime.pop(name, None)

    def counts(self) -> dict[tuple[str, str], int]:
        """Calls in flight per ``(driver, operation)``, for the scrape-time gauge."""
        counts: dict[tuple[str, str], int] = {}
        for call in self._running():
            key = (call.driver, call.operation.lower())
            counts[key] = counts.get(key, 0) + 1
        return counts

    async def close(self) -> None:
        tasks = [c.task for c in self._calls.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._calls.clear()


async def run_call(
    lookups: Lookups,
    record: DeviceAttachment,
    operation: Operation,
    claim: ResourceClaim | None,
    policy: PolicyState,
    *,
    with_test_annotations: bool,
) -> CallOutcome:
    """One action call for ``record``: read what the request needs, call, count and log it."""
    settings = policy.settings
    action = policy.action
    assert settings is not None
    assert action is not None
    node = await lookups.node(record.spec.node)
    spec = record.spec
    device = None
    if settings.spec.device_info:
        device = await lookups.device(spec.driver, spec.pool, spec.device)
    if operation is Operation.DETACH:
        grace = settings.detach_grace_period.total_seconds()
        if grace > 0:
            await asyncio.sleep(grace)
        timeout = settings.action_timeout.total_seconds()
    else:
        timeout = attach_call_timeout(settings.action_timeout, spec.deadline, datetime.now(UTC))
    request = build_request(
        operation,
        record,
        timeout_seconds=timeout,
        claim=claim,
        node=node,
        device=device,
        policy_generation=policy.generation,
        with_test_annotations=with_test_annotations,
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
