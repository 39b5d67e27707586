"""The I/O layer of the devicetaint operator: it feeds watch events to the state and executes its decisions.

Concurrency contract, as in :mod:`.cache`: watch callbacks run synchronously on the event loop; they
update the state and enqueue work, and never call the API. A worker asks the state for a decision, has the
core's executor send the plan the pure code makes of it (:func:`.podeviction.pod_plan`,
:func:`.messages.rule_plan`), then reports the outcome. A work item therefore always acts on
the current cache, whatever event queued it.

Evicting one pod (spec §9, with the cached pod instead of a live GET, see :mod:`.podeviction`): the Event
``Marking for deletion``, the ``DisruptionTarget`` status PATCH with ``metadata.uid`` as a precondition,
then a DELETE with a UID precondition. A pod that is already terminating only counts as evicted. With
``--eviction-mode=evict``, one call to the Eviction API replaces the PATCH and the DELETE, and a pod its
PodDisruptionBudget keeps is retried with backoff.

A pod due only because of rules annotated ``dra-operators.io/evictions-per-minute`` first takes a token
of their bucket (:mod:`.pacing`); without one its key is requeued for when the next token comes, and it
stays pending in the rule's condition meanwhile.

The DeviceTaintRule watch names the versions it understands (:data:`.operator.DEFINITION`): the runtime
watches the first one served at start, so the rules take part in the initial listing like every other kind,
and stops the process for a restart when the served version changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from operators.core import metrics as core_metrics
from operators.core.client import ApiError
from operators.core.events import NORMAL, WARNING, ObjectRef
from operators.core.keys import POD, Key
from operators.core.models import KubeModel, Tombstone, body_key, body_name, last_known, parse_or_skip
from operators.core.plan import Patch, Write, execute
from operators.core.reconcile import Done, Requeue, Result
from operators.dra import taintrules
from operators.dra.podgroups import (
    POD_GROUPS,
    SCHEDULING_GROUP,
    WORKLOAD_CLAIMS_NOT_SERVED,
    workload_claims_on,
)
from operators.dra.pods import pod_event_matters
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import metrics
from .apis import ServedApis, served_apis
from .cache import ClusterCache, Effects
from .evaluation import describe_reasons
from .messages import RuleWrite, rule_plan
from .models import RULE, DeviceTaintRule, Pod, ResourceClaim, ResourceSlice, pod_key
from .pacing import Pacer
from .podeviction import (
    EVENT_CANCELLING_DELETION,
    EVENT_REASON,
    EvictionResult,
    PodDone,
    PodEvict,
    budget_refusal,
    pod_plan,
    pod_ref,
)
from .settings import Settings

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

# Spec §2: upstream's code default (kube-controller-manager 1.37.2 actually uses 8, see the report).
DEFAULT_WORKERS = 10

Model = TypeVar("Model", bound=KubeModel)


def _now() -> datetime:
    return datetime.now(UTC)


class DeviceTaintController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.cache = ClusterCache()
        core_metrics.report_cache(self.cache)
        self._apis: ServedApis | None = None
        settings = runtime.settings
        self.eviction_api = isinstance(settings, Settings) and settings.eviction_mode == "evict"
        self.workload_claims_mode = settings.workload_claims if isinstance(settings, Settings) else "auto"
        # Refusals in a row per pod, for the backoff; an entry goes when its pod's eviction ends.
        self._budget_refusals: dict[Key, int] = {}
        self._pacer = Pacer()
        # Monotonic seconds for the pacing buckets; a test sets its own clock.
        self.clock: Callable[[], float] = time.monotonic
        # Paced pods that got their token: a retry (a failed DELETE, a budget's refusal) takes no second
        # one. Both sets lose a pod when its eviction ends, as the refusals do.
        self._admitted: set[Key] = set()
        self._held: set[Key] = set()
        metrics.state.observe(self)

    # --- Start -----------------------------------------------------------------------------------------

    async def prepare(self) -> bool:
        # Claims and slices are required watches: the runtime calls this only once both are served.
        apis = served_apis(self.runtime)
        served = self.runtime.served_resource(SCHEDULING_GROUP, POD_GROUPS.plural)
        enabled = workload_claims_on(self.workload_claims_mode, served is not None)
        if enabled is None:
            log.warning(WORKLOAD_CLAIMS_NOT_SERVED)
            return False
        if enabled != self.cache.workload_claims:
            # Members of a PodGroup are evicted for the claims reserved for their group (upstream
            # indexes pods by PodGroup for this).
            log.info(
                "PodGroup claims are %s (--workload-claims=%s)",
                "on" if enabled else "off",
                self.workload_claims_mode,
            )
            self.cache.workload_claims = enabled
        if self._apis is None:
            self._apis = apis
            self._report_rules(apis)
        return True

    def _report_rules(self, apis: ServedApis) -> None:
        if apis.rules is None:
            log.warning(
                "DeviceTaintRules are ignored, ResourceSlice taints still evict; %s",
                DEVICE_TAINT_RULES_UNSERVED,
            )
            return
        log.info("watching DeviceTaintRules as %s", apis.rules.api_version)
        if not apis.rule_status_writable:
            log.warning("%s serves no devicetaintrules/status: rule conditions are not written", apis.rules)

    # --- Watch callbacks (synchronous; no API calls) ---------------------------------------------------

    def upsert_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self._apply(Pod, body, self.cache.apply_pod)

    def delete_pod(self, body: Mapping[str, Any]) -> None:
        if pod_event_matters(body, self.cache.cached_pod):
            self._delete(Pod, body, self.cache.cached_pod(*body_key(body)), self._forget_pod)

    def _forget_pod(self, pod: Pod, _now: datetime) -> Effects:
        self._eviction_ended(pod_key(pod))
        return self.cache.delete_pod(pod)

    def _eviction_ended(self, item: Key) -> None:
        self._budget_refusals.pop(item, None)
        self._admitted.discard(item)
        self._held.discard(item)

    def paced_pod_count(self) -> int:
        return len(self._held)

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        self._apply(ResourceClaim, body, self.cache.apply_claim)

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        self._delete(ResourceClaim, body, self.cache.cached_claim(*body_key(body)), self.cache.delete_claim)

    def upsert_slice(self, body: Mapping[str, Any]) -> None:
        self._apply(ResourceSlice, body, self.cache.apply_slice)

    def delete_slice(self, body: Mapping[str, Any]) -> None:
        self._delete(ResourceSlice, body, self.cache.cached_slice(body_name(body)), self.cache.delete_slice)

    def upsert_rule(self, body: Mapping[str, Any]) -> None:
        self._apply(DeviceTaintRule, body, self.cache.apply_rule)

    def delete_rule(self, body: Mapping[str, Any]) -> None:
        self._delete(DeviceTaintRule, body, self.cache.cached_rule(body_name(body)), self.cache.delete_rule)

    def _apply(
        self, model: type[Model], body: Mapping[str, Any], apply: Callable[[Model, datetime], Effects]
    ) -> None:
        obj = parse_or_skip(model, dict(body), log)
        if obj is None:
            return
        self._route(apply(obj, _now()))

    def _delete(
        self,
        model: type[Model],
        body: Mapping[str, Any],
        cached: Model | None,
        delete: Callable[[Model, datetime], Effects],
    ) -> None:
        """``delete`` the object ``body`` reports gone. A tombstone (a deletion during a watch gap)
        carries no spec or status, so it would not parse, or would parse as an empty object: the
        deletion is applied to ``cached``, the state last seen under the tombstone's UID. When the
        cache holds none, or a newer object of that name, there is nothing to forget."""
        if not isinstance(body, Tombstone):
            self._apply(model, body, delete)
            return
        final = last_known(body, cached)
        if final is not None:
            self._route(delete(final, _now()))

    def _route(self, effects: Effects) -> None:
        for enqueue in effects.enqueue:
            self.runtime.queue.add_after(enqueue.item, enqueue.delay)
        # During the initial listing the state is still partial (a newer slice generation may not be
        # listed yet), so an eviction "cancelled" then was never really scheduled: no Event.
        for item in effects.cancelled if self.runtime.queue.is_open else ():
            log.info("eviction cancelled", extra={"object": f"Pod {item.namespace}/{item.name}"})
            self.runtime.events.record(pod_ref(item), NORMAL, EVENT_REASON, EVENT_CANCELLING_DELETION)
        for warning in effects.warnings:
            log.warning("%s", warning)
        # Rules reach the cache only through their watch, so the version is known by then.
        rules = self._apis.rules if self._apis is not None else None
        if rules is not None:
            for rule_warning in effects.rule_warnings:
                rule = rule_warning.item
                where = ObjectRef(rules.api_version, taintrules.KIND, rule.name, None, rule.uid)
                self.runtime.events.record(where, WARNING, rule_warning.reason, rule_warning.message)

    # --- Work items ------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key.kind == POD:
            return await self._sync_pod(key)
        if key.kind == RULE:
            return await self._sync_rule(key)
        raise ValueError(f"not a devicetaint work key: {key!r}")

    async def _sync_pod(self, item: Key) -> Result:
        now = _now()
        decision = self.cache.decide_pod(item, now)
        refusals = self._budget_refusals.get(item, 0)
        plan = pod_plan(decision, eviction_api=self.eviction_api, refusals=refusals)
        if not isinstance(decision, PodEvict):
            if isinstance(decision, PodDone):
                self._eviction_ended(item)
            self._held.discard(item)
            return await execute(plan, self.runtime)
        wait = self._pace(decision, now)
        if wait > 0:
            return Requeue(wait, "evictions-per-minute")
        ended: list[ApiError] = []

        def written(write: Write) -> None:
            # At once, not after the plan: a DELETE that fails must not send the status PATCH again.
            if isinstance(write, Patch):
                self.cache.pod_status_patched(decision)

        result = await execute(
            plan, self.runtime, written=written, ended=lambda _write, err: ended.append(err)
        )
        outcome = EvictionResult.EVICTED
        where = {"object": f"Pod {item.namespace}/{item.name}"}
        for err in ended:
            refusal = budget_refusal(err)
            if refusal is not None:
                # Still scheduled, so still pending in the rule's condition.
                self._budget_refusals[item] = refusals + 1
                self.runtime.events.record(pod_ref(item), WARNING, EVENT_REASON, refusal.event_message)
                log.info("eviction refused: %s", refusal.detail, extra=where)
                return result
            log.info("gone before its eviction", extra=where)
            outcome = EvictionResult.GONE
        self._eviction_ended(item)
        finished = self.cache.finish_pod(decision, outcome, _now())
        if finished.latency is not None:
            metrics.pod_deletions.inc()
            metrics.pod_deletion_duration.observe(finished.latency)
            log.info(
                "evicted %.3fs after its eviction time; because of: %s",
                finished.latency,
                describe_reasons(decision.eviction.reasons),
                extra=where,
            )
        self._route(finished.effects)
        return Done()

    def _pace(self, decision: PodEvict, now: datetime) -> float:
        """Seconds the pod must still wait for its paced rules' tokens; 0 to evict now."""
        item = decision.item
        if decision.already_terminating or item in self._admitted:
            return 0.0
        paces = self.cache.paces(decision, now)
        if not paces:
            return 0.0
        wait = self._pacer.admit(paces, self.clock())
        if wait > 0:
            if item not in self._held:
                log.info(
                    "eviction paced by evictions-per-minute; next token in %.1fs",
                    wait,
                    extra={"object": f"Pod {item.namespace}/{item.name}"},
                )
            self._held.add(item)
            return wait
        self._held.discard(item)
        self._admitted.add(item)
        return 0.0

    async def _sync_rule(self, item: Key) -> Result:
        decision = self.cache.decide_rule(item, _now())
        apis = self._apis
        status_of = apis.rules if apis is not None and apis.rule_status_writable else None
        plan = rule_plan(item, decision, status_of)

        def written(_write: Write) -> None:
            if not isinstance(decision, RuleWrite):
                return
            condition = decision.condition
            self.cache.rule_status_written(item, condition)
            log.info(
                "EvictionInProgress=%s %s: %s",
                condition.status,
                condition.reason,
                condition.message or '""',
                extra={"object": f"DeviceTaintRule {item.name}"},
            )

        return await execute(plan, self.runtime, written=written)
