"""The I/O layer of the device-health operator: watch events into the cache, decisions into API calls.

One work-queue key per policy, ``Key(POLICY, "", name)``. A pass evaluates the policy's scope in a
worker thread (CEL over every published device, as taintselector does), hands it to
:func:`.decide.decide` with a snapshot of the cache and the signal tracks of the previous pass, and
the core's executor carries out the plan (:mod:`operators.core.plan`). The tracks (when each
signal began, when each tainted device went quiet) live in the controller; at a restart they are
rebuilt from the cluster (the slice taints' ``timeAdded``, the rules the policy owns), so a restart
can only delay an action, never hasten one.

Watch callbacks are synchronous and never call the API; slice, pod and claim events are
debounced, so that a driver republishing fifty slices costs one pass per policy. Pods without
claims are dropped before they are parsed (:func:`operators.dra.pods.pod_event_matters`).
A periodic resync (``every``) passes over every policy once a minute, so that a deadline is met
even if a requeue was lost with a failed write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.plan import Create, Delete, Patch, Write, execute
from operators.core.reconcile import Done, Result
from operators.core.workqueue import route
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.pods import pod_event_matters
from operators.dra.selection import Invalid, Selection, select_devices
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import metrics
from .cache import ClusterCache
from .decide import Decision, View, decide
from .models import DeviceId, HealthPolicy
from .signals import Track
from .status import Counts

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 2
POLICY = "policy"
"""The kind of the work-queue keys: DeviceHealthPolicies, cluster-scoped."""
RESYNC_KEY = Key.periodic("resync")
RESYNC_SECONDS = 60.0
SLICE_DEBOUNCE_SECONDS = 0.2
RULE_DEBOUNCE_SECONDS = 0.5
# Pods and claims change with every workload that comes and goes.
POD_DEBOUNCE_SECONDS = 1.0


class DeviceHealthController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.cache = ClusterCache()
        self.rules_api: ServedResource | None = None
        self.tracks: dict[str, dict[DeviceId, Track]] = {}
        """Policy UID -> the signal tracks of its last pass."""
        self.counts: dict[str, Counts] = {}
        """Policy name -> its last counts, for the gauges."""
        self._prepared = False
        # One scope evaluation at a time: each holds its own working set (see taintselector).
        self._evaluating = asyncio.Lock()
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        metrics.state.observe(self)

    # --- Start -----------------------------------------------------------------------------------------

    async def prepare(self) -> bool:
        # Policies, slices, classes and claims are required watches: the runtime calls this only
        # once they are served.
        if not self._prepared:
            self._prepared = True
            # The version the runtime watches; a change of it restarts the process, so the rules
            # are written as the version read.
            self.rules_api = self.runtime.served_resource(GROUP, taintrules.PLURAL)
            if self.rules_api is None:
                log.warning("%s; policies taint nothing (condition Ready=False)", DEVICE_TAINT_RULES_UNSERVED)
            else:
                log.info("writing DeviceTaintRules as %s", self.rules_api.api_version)
            self.runtime.queue.every(RESYNC_KEY, RESYNC_SECONDS, first=RESYNC_SECONDS)
        return True

    # --- Watch callbacks (synchronous; no API calls) ---------------------------------------------------

    def upsert_policy(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_policy, body, 0.0)

    def delete_policy(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        self.counts.pop(str(meta.get("name")), None)
        self.tracks.pop(str(meta.get("uid")), None)
        self._route(self.cache.delete_policy, body, 0.0)

    def upsert_slice(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_slice, body, SLICE_DEBOUNCE_SECONDS)

    def delete_slice(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_slice, body, SLICE_DEBOUNCE_SECONDS)

    def upsert_class(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_class, body, SLICE_DEBOUNCE_SECONDS)

    def delete_class(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_class, body, SLICE_DEBOUNCE_SECONDS)

    def upsert_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self._route(self.cache.upsert_pod, body, POD_DEBOUNCE_SECONDS)

    def delete_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self._route(self.cache.delete_pod, body, POD_DEBOUNCE_SECONDS)

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_claim, body, POD_DEBOUNCE_SECONDS)

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_claim, body, POD_DEBOUNCE_SECONDS)

    def upsert_rule(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_rule, body, RULE_DEBOUNCE_SECONDS)

    def delete_rule(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_rule, body, RULE_DEBOUNCE_SECONDS)

    def _route(
        self, update: Callable[[Mapping[str, Any]], list[str]], body: Mapping[str, Any], delay: float
    ) -> None:
        route(self.runtime.queue, POLICY, update, body, delay, log)

    # --- Reconcile -------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key == RESYNC_KEY:
            for name in self.cache.every_policy():
                self.runtime.queue.add_after(Key(POLICY, "", name), 0.0)
            return Done()
        if key.kind != POLICY:
            raise ValueError(f"not a devicehealth work key: {key!r}")
        policy = self.cache.policies.get(key.name)
        if policy is None or policy.metadata.deletion_timestamp is not None:
            return Done("deleted: its rules go with it (owner references)")
        outcome = await self._evaluate(policy)
        cache = self.cache
        view = View(
            slices=list(cache.slices.values()),
            pods=list(cache.pods.values()),
            claims=dict(cache.claims),
            rules=cache.rules_of(policy.metadata.uid),
        )
        uid = policy.metadata.uid
        decision = decide(policy, outcome, view, self.tracks.get(uid, {}), self.now(), self.rules_api)
        self.tracks[uid] = dict(decision.tracks)
        if decision.counts is not None:
            self.counts[policy.metadata.name] = decision.counts
        return await execute(decision.plan, self.runtime, written=self._written(decision))

    def _written(self, decision: Decision) -> Callable[[Write], None]:
        def written(write: Write) -> None:
            operation = _RULE_OPERATIONS.get(type(write))
            if operation is None:
                return
            metrics.rule_writes.labels(operation=operation).inc()
            if isinstance(write, Create):
                name = str(write.body.get("metadata", {}).get("name", ""))
                since = decision.signalled_since.get(name)
                if since is not None:
                    metrics.signal_to_taint.observe(max(0.0, (self.now() - since).total_seconds()))
                log.info("tainted: DeviceTaintRule %s created", name)
            elif isinstance(write, Delete):
                log.info("cleared: %s deleted", write.path)

        return written

    async def _evaluate(self, policy: HealthPolicy) -> Selection | Invalid:
        async with self._evaluating:
            slices, classes = list(self.cache.slices.values()), dict(self.cache.classes)
            return await asyncio.to_thread(select_devices, policy.spec.scope, slices, classes)


_RULE_OPERATIONS: dict[type[Write], str] = {Create: "create", Patch: "update", Delete: "delete"}
