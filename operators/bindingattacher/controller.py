"""The binding attacher's I/O layer: watch events in, reconciles and API calls out.

Watch side (synchronous, on the event loop, no API calls): claims, policies and ledger
records are parsed into :mod:`.cache` and the affected keys are queued.
Unreadable objects are logged with their reference and skipped. A deletion seen only as a
tombstone (after a watch gap) acts on the cached object of its UID, and on nothing if the cache
holds another one under that name.

Work side, one queue of :class:`~operators.core.keys.Key` s of three kinds:

* ``claim`` (with the claim's UID, see :func:`~.cache.record_claim_key`) ->
  :class:`~.pipeline.ClaimPipeline` (records, calls, status entries);
* ``policy`` -> :class:`~.policysync.PolicySync` (conditions, action instance);
* the periodic :data:`SWEEP_KEY` -> the garbage-collection sweep (spec §13.4), every
  ``--resync-period`` after the previous one: it re-queues every claim that has records or
  results of ours, and deletes expired DeviceTaintRules. It first runs when the queue opens, i.e.
  after the initial listing of every watched kind, so no detach is ever decided from a cache that
  is still filling (spec §16.2).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from operators.core.keys import CLAIM, Key
from operators.core.models import Tombstone, body_metadata, body_name, last_known, parse_or_skip
from operators.core.reconcile import Done, Result
from operators.dra import api, taintrules

from . import metrics
from .actions import close_action
from .actions.testaction import TestAction
from .cache import (
    POLICY,
    claim_key,
    has_binding_conditions,
    policy_key,
    put_record,
    record_claim_key,
)
from .collaborators import Collaborators
from .identity import DeviceKey
from .models import DeviceAttachment, Phase, ResourceClaim
from .pipeline import ClaimPipeline
from .policysync import PolicySync

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

SWEEP_KEY = Key.periodic("sweep")

RECORD_COUNTS_DELAY = 10.0
"""``status.records`` of a policy is refreshed at most this often (spec §21.4)."""


class BindingAttacherController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.shared = Collaborators.of(runtime)
        self.policies = PolicySync(self.shared)
        self.claims = ClaimPipeline(self.shared)
        runtime.events.on_dropped = metrics.events_dropped.inc
        metrics.state.observe(self)
        if runtime.own_namespace is not None:
            runtime.own_namespace.subscribe(self._namespace_changed)
        # Queued now, held back by the gated queue until the initial listing of every kind is complete.
        runtime.queue.every(SWEEP_KEY, self.shared.settings.resync_seconds)

    # -- start -------------------------------------------------------------------------------------

    async def prepare(self) -> bool:
        # Claims, policies and records are required watches: the runtime calls this only once
        # they are served. The rules were found by it too (OperatorDefinition.discovered), in any
        # of their versions.
        rules = self.runtime.served_resource(api.GROUP, taintrules.PLURAL)
        if rules is None:
            log.warning(
                "no version of %s serves %s (asked for %s): failed devices are not tainted, and "
                "policies say so in their Accepted condition",
                api.GROUP,
                taintrules.PLURAL,
                ", ".join(taintrules.VERSIONS),
            )
        else:
            log.info("failure taints are DeviceTaintRules of %s", rules.api_version)
        self.shared.kube.taints.api = rules
        return True

    # -- watch side ----------------------------------------------------------------------------------

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        keep_test_annotations = self.shared.settings.enable_test_actions
        cache = self.shared.cache
        claim = parse_or_skip(ResourceClaim, body, log, lambda raw: cache.project(raw, keep_test_annotations))
        if claim is None:
            return
        if not self.shared.cache.claims.put(claim):
            return
        uid = claim.metadata.uid
        if self.shared.cache.records.for_claim(uid) or self._relevant(claim):
            self.shared.queue.add(claim_key(claim))

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        uid = str((body.get("metadata") or {}).get("uid", ""))
        claim = self.shared.cache.claims.remove(uid)
        if claim is not None and self.shared.cache.records.for_claim(uid):
            self.shared.queue.add(claim_key(claim))

    def upsert_policy(self, body: Mapping[str, Any]) -> None:
        state = self.shared.cache.policies.observe(body)
        for sibling in self.shared.cache.policies.same_driver(state.driver) or [state]:
            self.shared.queue.add(policy_key(sibling.name))

    def delete_policy(self, body: Mapping[str, Any]) -> None:
        state = self.shared.cache.policies.forget(body)
        if state is None:
            return
        name = state.name
        if state.action is not None:
            self.runtime.spawn(close_action(state.action), f"close-action-{name}")
        for sibling in self.shared.cache.policies.same_driver(state.driver):
            self.shared.queue.add(policy_key(sibling.name))
        for key in self.shared.cache.driver_keys(state.driver):
            self.shared.queue.add(key)

    def upsert_record(self, body: Mapping[str, Any]) -> None:
        record = self._parse_record(body)
        if record is None or not put_record(self.shared.cache.records, record):
            return
        self.shared.queue.add(record_claim_key(record))
        self.shared.queue.add_after(policy_key(record.spec.policy.name), RECORD_COUNTS_DELAY)
        if record.status.phase in (Phase.DETACHED, Phase.FAILED):
            self._wake_waiters(record)

    def delete_record(self, body: Mapping[str, Any]) -> None:
        record = self._deleted_record(body)
        if record is None:
            return
        self.shared.cache.records.remove(record.metadata.name)
        self.shared.queue.add(record_claim_key(record))
        self.shared.queue.add(policy_key(record.spec.policy.name))
        self._wake_waiters(record)

    def _parse_record(self, body: Mapping[str, Any]) -> DeviceAttachment | None:
        if not self._in_ledger(body):
            return None
        return parse_or_skip(DeviceAttachment, body, log)

    def _deleted_record(self, body: Mapping[str, Any]) -> DeviceAttachment | None:
        """The final state of a deleted record. A tombstone has none: the record cached under its
        name stands for it if it has its UID; a record of that name created since stays."""
        if not self._in_ledger(body):
            return None
        if isinstance(body, Tombstone):
            return last_known(body, self.shared.cache.records.get(body_name(body)))
        return parse_or_skip(DeviceAttachment, body, log)

    def _in_ledger(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` is in the operator namespace, the only one that holds our ledger."""
        return body_metadata(body).get("namespace") == self.shared.settings.namespace

    def _wake_waiters(self, record: DeviceAttachment) -> None:
        """Records waiting for this device (spec §13.3) are re-checked at once."""
        for other in self.shared.cache.records.for_device(DeviceKey.of_record(record)):
            if other.metadata.name != record.metadata.name and other.status.phase is Phase.PENDING:
                self.shared.queue.add(record_claim_key(other))

    def _relevant(self, claim: ResourceClaim) -> bool:
        if self.shared.cache.projected_without_a_driver(claim):
            return True
        if not has_binding_conditions(claim):
            return False
        drivers = self.shared.cache.policies.drivers()
        allocation = claim.status.allocation
        return allocation is not None and any(r.driver in drivers for r in allocation.devices.results)

    def _namespace_changed(self) -> None:
        """Every policy's Ready depends on the ledger's namespace; their syncs re-queue the claims."""
        for state in self.shared.cache.policies.all():
            self.shared.queue.add(policy_key(state.name))

    # -- work side -----------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key.kind == CLAIM:
            return await self.claims.sync(key)
        elif key.kind == POLICY:
            return await self.policies.sync(key.name)
        elif key == SWEEP_KEY:
            await self._sweep()
        return Done()

    async def _sweep(self) -> None:
        for record in self.shared.cache.records.all():
            self.shared.queue.add(record_claim_key(record))
        for claim in self.shared.cache.claims:
            if self._relevant(claim):
                self.shared.queue.add(claim_key(claim))
        await self.shared.kube.taints.sweep()

    # -- metrics snapshot ------------------------------------------------------------------------

    def record_phases(self) -> Iterable[tuple[str, str, int]]:
        counts: dict[tuple[str, str], int] = {}
        for record in self.shared.cache.records.all():
            key = (record.spec.driver, record.status.phase.value)
            counts[key] = counts.get(key, 0) + 1
        return [(driver, phase, n) for (driver, phase), n in counts.items()]

    def inflight(self) -> Iterable[tuple[str, str, int]]:
        return [(driver, op, n) for (driver, op), n in self.shared.calls.counts().items()]

    def policy_readiness(self) -> Iterable[tuple[str, str, bool]]:
        return [(s.name, s.driver, s.ready) for s in self.shared.cache.policies.all() if s.evaluated]

    def test_action_calls(self) -> Iterable[tuple[str, str, int]]:
        totals: dict[tuple[str, str], int] = {}
        for state in self.shared.cache.policies.all():
            if isinstance(state.action, TestAction):
                for key, count in state.action.calls.items():
                    totals[key] = totals.get(key, 0) + count
        return [(op, outcome, n) for (op, outcome), n in totals.items()]
