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

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.models import body_metadata, body_name
from operators.core.plan import Create, Delete, Write, execute, operation
from operators.core.reconcile import Done, Result
from operators.core.workqueue import route
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.pods import pod_event_matters
from operators.dra.scopes import CLAIM_DEBOUNCE_SECONDS, ScopeController, Update, report_rules_api
from operators.dra.selection import Invalid, Selection, select_devices

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


class DeviceHealthController(ScopeController[ClusterCache]):
    def __init__(self, runtime: Runtime) -> None:
        super().__init__(ClusterCache())
        self.runtime = runtime
        self.rules_api: ServedResource | None = None
        self.tracks: dict[str, dict[DeviceId, Track]] = {}
        """Policy UID -> the signal tracks of its last pass."""
        self.counts: dict[str, Counts] = {}
        """Policy name -> its last counts, for the gauges."""
        self._prepared = False
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
            report_rules_api(log, self.rules_api, "policies taint nothing (condition Ready=False)")
            self.runtime.queue.every(RESYNC_KEY, RESYNC_SECONDS, first=RESYNC_SECONDS)
        return True

    # --- Watch callbacks (synchronous; no API calls); slices, classes, claims and rules: the base's ---

    def upsert_policy(self, body: Mapping[str, Any]) -> None:
        self.upsert(self.cache.upsert_owner, self.delete_policy, body, 0.0)

    def delete_policy(self, body: Mapping[str, Any]) -> None:
        self.tracks.pop(str(body_metadata(body).get("uid")), None)
        self.route(self.cache.delete_owner, body, 0.0)
        # The tombstone of a policy's predecessor leaves the policy, and its gauges, in place.
        name = body_name(body)
        if name not in self.cache.policies:
            self.counts.pop(name, None)

    # Pods change as often as claims do.
    def upsert_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self.upsert(self.cache.upsert_pod, self.delete_pod, body, CLAIM_DEBOUNCE_SECONDS)

    def delete_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self.route(self.cache.delete_pod, body, CLAIM_DEBOUNCE_SECONDS)

    def route(self, update: Update, body: Mapping[str, Any], delay: float) -> bool:
        return route(self.runtime.queue, POLICY, update, body, delay, log)

    # --- Reconcile -------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key == RESYNC_KEY:
            for name in self.cache.every_owner():
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
            rule_controllers=cache.rule_controllers,
        )
        uid = policy.metadata.uid
        decision = decide(policy, outcome, view, self.tracks.get(uid, {}), self.now(), self.rules_api)
        self.tracks[uid] = dict(decision.tracks)
        if decision.counts is not None:
            self.counts[policy.metadata.name] = decision.counts
        return await execute(decision.plan, self.runtime, written=self._written(decision))

    def _written(self, decision: Decision) -> Callable[[Write], None]:
        def written(write: Write) -> None:
            verb = operation(write)
            if verb is None:
                return
            metrics.rule_writes.labels(operation=verb).inc()
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
        return await self.select(partial(select_devices, policy.spec.scope))
