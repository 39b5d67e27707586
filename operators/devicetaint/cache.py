"""The in-memory model of the devicetaint operator, fed by watch events (spec §8).

Concurrency contract: one :class:`ClusterCache` per process, used from one asyncio event loop. No
method awaits or does I/O, so every call is atomic with respect to the others; watch handlers and
workers may interleave freely between calls. Workers therefore take a decision, run the API calls
without touching the state, and report back, exactly as upstream releases its mutex around API calls.

Each watch event updates the cache and returns :class:`Effects`: work items to enqueue (some delayed)
and pods whose scheduled eviction was cancelled (the caller emits ``Cancelling deletion`` for those).
The state never trusts an event's content beyond the cache update: each work item recomputes from the
current cache when it runs, so duplicate, late or coalesced items are harmless.

Kept in memory (spec §8): pods that reference claims, allocated claims with their eviction, pools,
rules (all of them: the status decision needs every rule, eviction only the NoExecute ones), the
evicted count per rule UID, the scheduled evictions and the UIDs of recently evicted pods.

A rule whose selector narrows beyond driver, pool and device (a class or CEL selectors, see
:func:`operators.dra.taintrules.narrows_beyond_names`) is kept for its condition only: it evicts
nothing, counts nothing, and its condition, a log line and a Warning Event say why.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from operators.core.conditions import Condition, ObservedCondition
from operators.core.keys import Key
from operators.dra.pools import PoolId
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NONE

from .evaluation import (
    ClaimEntry,
    Consumers,
    ObjectKey,
    PodEviction,
    RuleTaintReason,
    allocated_devices,
    claim_eviction,
    due_reasons,
    pending_pods,
    pod_eviction,
    published_devices,
    rule_reasons,
)
from .messages import (
    REASON_UNSUPPORTED_SELECTOR,
    RULE_STATUS_PERIOD,
    RuleCounts,
    RuleDecision,
    RuleDrop,
    RuleRequeue,
    eviction_in_progress,
    says_unsupported,
    status_decision,
    throttle_delay,
    unsupported_selector,
    unsupported_selector_text,
)
from .models import (
    RULE,
    DeviceTaintRule,
    Pod,
    PodCondition,
    ResourceClaim,
    ResourceSlice,
    RuleStatus,
    pod_key,
)
from .pacing import REASON_INVALID_PACING, Pace, malformed, malformed_text, pace_of
from .podeviction import EVICTED_LRU_SIZE, EvictionResult, PodDecision, PodDone, PodEvict, decide_pod
from .pools import PoolIndex

_STATUS_DELAY = RULE_STATUS_PERIOD.total_seconds()


@dataclass(frozen=True)
class Enqueue:
    item: Key
    delay: float = 0.0
    """Seconds; 0 means now."""


@dataclass(frozen=True)
class RuleWarning:
    """A Warning Event to post on a rule; the controller knows the API version the rule is read as."""

    item: Key
    reason: str
    message: str


@dataclass
class Effects:
    enqueue: list[Enqueue] = field(default_factory=list)
    cancelled: list[Key] = field(default_factory=list)
    """Pods whose scheduled eviction was dropped: emit ``Cancelling deletion`` on each."""
    warnings: list[str] = field(default_factory=list)
    rule_warnings: list[RuleWarning] = field(default_factory=list)

    def extend(self, other: Effects) -> None:
        self.enqueue.extend(other.enqueue)
        self.cancelled.extend(other.cancelled)
        self.warnings.extend(other.warnings)
        self.rule_warnings.extend(other.rule_warnings)


@dataclass(frozen=True)
class EvictionFinished:
    latency: float | None
    """Seconds from the eviction time to now, for the histogram; None when the pod does not count."""
    effects: Effects


class ClusterCache:
    def __init__(self) -> None:
        self._pods: dict[ObjectKey, Pod] = {}
        # Decided once at start, before any event: whether members use their PodGroup's claims.
        self.workload_claims = False
        self._members: dict[ObjectKey, set[ObjectKey]] = {}
        self._claims: dict[ObjectKey, ClaimEntry] = {}
        self._pools = PoolIndex()
        self._rules: dict[str, DeviceTaintRule] = {}
        self._evicted_per_rule: dict[str, int] = {}
        self._scheduled: dict[Key, PodEviction] = {}
        self._evicted_uids: OrderedDict[str, None] = OrderedDict()
        self._warned: dict[tuple[str, str], tuple[str, int]] = {}
        # Per rule name: the UID and the malformed pacing value already warned about.
        self._pacing_warned: dict[str, tuple[str, str]] = {}

    # --- Introspection -------------------------------------------------------------------------------

    def scheduled_eviction(self, item: Key) -> PodEviction | None:
        return self._scheduled.get(item)

    def evicted_count(self, rule_uid: str) -> int:
        return self._evicted_per_rule.get(rule_uid, 0)

    def cached_pod(self, namespace: str, name: str) -> Pod | None:
        return self._pods.get((namespace, name))

    def cached_claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """The claim as last seen, while it is allocated (no other claim is kept)."""
        entry = self._claims.get((namespace, name))
        return entry.claim if entry is not None else None

    def cached_slice(self, name: str) -> ResourceSlice | None:
        return self._pools.slice_named(name)

    def cached_objects(self) -> dict[str, int]:
        return {
            "pods": len(self._pods),
            "resourceclaims": len(self._claims),
            "resourceslices": self._pools.slice_count(),
            "devicetaintrules": len(self._rules),
        }

    def cached_rule(self, name: str) -> DeviceTaintRule | None:
        return self._rules.get(name)

    def rule_names(self) -> list[str]:
        return sorted(self._rules)

    # --- Pods ----------------------------------------------------------------------------------------

    def apply_pod(self, pod: Pod, now: datetime) -> Effects:
        effects = Effects()
        old = self._pods.get(pod.key)
        if old is not None and old.metadata.uid != pod.metadata.uid:
            effects.extend(self.delete_pod(old))
            old = None
        if old is not None:
            self._leave_group(old)
        if pod.uses_claims:
            self._pods[pod.key] = pod
            self._join_group(pod)
        else:
            self._pods.pop(pod.key, None)
        # Our own DisruptionTarget write and kubelet status updates must not re-trigger anything.
        if old is None or old.claim_inputs() != pod.claim_inputs():
            self._reevaluate(pod, now, effects)
        return effects

    def delete_pod(self, pod: Pod) -> Effects:
        """A deleted pod needs no eviction, and no ``Cancelling deletion`` Event either."""
        cached = self._pods.get(pod.key)
        if cached is not None and cached.metadata.uid == pod.metadata.uid:
            del self._pods[pod.key]
            self._leave_group(cached)
        effects = Effects()
        self._unschedule(pod_key(pod), effects)
        return effects

    # --- Claims --------------------------------------------------------------------------------------

    def apply_claim(self, claim: ResourceClaim, now: datetime) -> Effects:
        effects = Effects()
        old = self._claims.get(claim.key)
        if old is not None and old.claim.metadata.uid != claim.metadata.uid:
            effects.extend(self.delete_claim(old.claim, now))
            old = None
        if old is not None and old.claim == claim:
            return effects
        if claim.status.allocation is None:
            if old is None:
                return effects
            del self._claims[claim.key]
        else:
            # The allocation is immutable once set; recompute only if it really is another one.
            keep = old is not None and old.claim.status.allocation == claim.status.allocation
            eviction = old.eviction if old is not None and keep else self._claim_eviction(claim)
            self._claims[claim.key] = ClaimEntry(claim, eviction)
        affected = [claim] if old is None else [old.claim, claim]
        self._reevaluate_consumers(affected, now, effects)
        return effects

    def delete_claim(self, claim: ResourceClaim, now: datetime) -> Effects:
        effects = Effects()
        old = self._claims.get(claim.key)
        if old is None or old.claim.metadata.uid != claim.metadata.uid:
            return effects
        del self._claims[claim.key]
        self._reevaluate_consumers([old.claim], now, effects)
        return effects

    # --- Slices --------------------------------------------------------------------------------------

    def apply_slice(self, resource_slice: ResourceSlice, now: datetime) -> Effects:
        effects = Effects()
        self._warn_undated_slice(resource_slice, effects)
        self._recompute_claims_using(self._pools.apply(resource_slice), now, effects)
        return effects

    def delete_slice(self, resource_slice: ResourceSlice, now: datetime) -> Effects:
        effects = Effects()
        self._warned.pop(("ResourceSlice", resource_slice.metadata.name), None)
        self._recompute_claims_using(self._pools.delete(resource_slice.metadata.name), now, effects)
        return effects

    # --- Rules ---------------------------------------------------------------------------------------

    def apply_rule(self, rule: DeviceTaintRule, now: datetime) -> Effects:
        effects = Effects()
        name = rule.metadata.name
        old = self._rules.get(name)
        if old is not None and old.metadata.uid != rule.metadata.uid:
            effects.extend(self.delete_rule(old, now))
            old = None
        self._rules[name] = rule
        self._warn_malformed_pacing(rule, effects)
        if old is not None and old.evictions_per_minute != rule.evictions_per_minute:
            self._wake_paced_pods(rule, effects)
        if old is not None and old.spec == rule.spec:
            return effects
        # First the status, so that users see the rule acknowledged before its first eviction.
        effects.enqueue.append(Enqueue(Key(RULE, "", name, rule.metadata.uid)))
        self._warn_undated_rule(rule, effects)
        self._warn_unsupported_selector(rule, effects)
        if _evicts(old) or _evicts(rule):
            self._recompute_all_claims(now, effects)
        return effects

    def delete_rule(self, rule: DeviceTaintRule, now: datetime) -> Effects:
        """Forget the rule and its count; its queued items find it gone and drop themselves."""
        effects = Effects()
        self._evicted_per_rule.pop(rule.metadata.uid, None)
        cached = self._rules.get(rule.metadata.name)
        if cached is None or cached.metadata.uid != rule.metadata.uid:
            return effects
        del self._rules[rule.metadata.name]
        self._warned.pop(("DeviceTaintRule", rule.metadata.name), None)
        self._pacing_warned.pop(rule.metadata.name, None)
        if _evicts(cached):
            self._recompute_all_claims(now, effects)
        return effects

    def clear_rules(self, now: datetime) -> Effects:
        """The DeviceTaintRule API is no longer served: slice taints go on, rule taints stop."""
        effects = Effects()
        for name in self.rule_names():
            effects.extend(self.delete_rule(self._rules[name], now))
        return effects

    # --- Pod work items ------------------------------------------------------------------------------

    def decide_pod(self, item: Key, now: datetime) -> PodDecision:
        decision = decide_pod(
            item,
            self._scheduled.get(item),
            item.uid in self._evicted_uids,
            self._pods.get((item.namespace, item.name)),
            now,
        )
        if isinstance(decision, PodDone) and decision.forget:
            self._forget(item)
        return decision

    def paces(self, decision: PodEvict, now: datetime) -> tuple[Pace | None, ...]:
        """One entry per taint that makes the pod due now, None for a taint that is not paced
        (:class:`.pacing.Pacer`); empty when no rule behind the eviction is paced, which spares
        the common case the walk over the pod's claims."""
        paced: dict[str, Pace] = {}
        for reason in rule_reasons(decision.eviction):
            rule = self._rules.get(reason.rule_name)
            pace = pace_of(rule) if rule is not None and rule.metadata.uid == reason.rule_uid else None
            if pace is not None:
                paced[reason.rule_uid] = pace
        item = decision.item
        pod = self._pods.get((item.namespace, item.name))
        if not paced or pod is None:
            return ()
        evicting = (rule for rule in self._rules.values() if _evicts(rule))
        due = due_reasons(pod, self._claims, self._pools, evicting, now, self.workload_claims)
        return tuple(
            paced.get(reason.rule_uid) if isinstance(reason, RuleTaintReason) else None for reason in due
        )

    def pod_status_patched(self, decision: PodEvict) -> None:
        """Overlay a successful ``DisruptionTarget`` PATCH on the cached pod.

        A retry after a failed DELETE then skips the PATCH even before the watch echoes it: the pod gets
        one status write however often the DELETE fails (spec §17, scenario 32).
        """
        item = decision.item
        cached = self._pods.get((item.namespace, item.name))
        if cached is None or cached.metadata.uid != item.uid or decision.status_patch is None:
            return
        written = PodCondition.model_validate(decision.status_patch["status"]["conditions"][0])
        others = tuple(c for c in cached.status.conditions if c.type != written.type)
        status = cached.status.model_copy(update={"conditions": (*others, written)})
        self._pods[cached.key] = cached.model_copy(update={"status": status})

    def finish_pod(self, decision: PodEvict, outcome: EvictionResult, now: datetime) -> EvictionFinished:
        """Record what the worker achieved for ``decision``; only EVICTED counts (spec §9 step 7)."""
        self._forget(decision.item)
        effects = Effects()
        if outcome is not EvictionResult.EVICTED:
            return EvictionFinished(None, effects)
        live_rule_uids = {rule.metadata.uid for rule in self._rules.values()}
        for reason in rule_reasons(decision.eviction):
            if reason.rule_uid in live_rule_uids:
                self._evicted_per_rule[reason.rule_uid] = self.evicted_count(reason.rule_uid) + 1
            # Not at once: the cache must first see the pod terminating, or it would still count as pending.
            effects.enqueue.append(_status_pass(reason))
        latency = max((now - decision.eviction.when).total_seconds(), 0.0)
        return EvictionFinished(latency, effects)

    # --- Rule work items -----------------------------------------------------------------------------

    def decide_rule(self, item: Key, now: datetime) -> RuleDecision:
        rule = self._rules.get(item.name)
        if rule is None or rule.metadata.uid != item.uid:
            return RuleDrop()
        existing = rule.eviction_condition
        generation = rule.metadata.generation
        # Checked before counting, which walks every claim.
        delay = throttle_delay(existing, generation, now)
        if delay is not None:
            return RuleRequeue(delay)
        narrowing = rule.narrowing_fields
        if narrowing:
            content = unsupported_selector(narrowing, self.evicted_count(rule.metadata.uid))
        else:
            content = eviction_in_progress(rule.spec.taint.effect, self.rule_counts(rule))
        return status_decision(existing, content, generation, now)

    def rule_status_written(self, item: Key, condition: Condition) -> None:
        """Overlay a successful write on the cache, so that the throttle holds before the watch echoes it."""
        rule = self._rules.get(item.name)
        if rule is None or rule.metadata.uid != item.uid:
            return
        written = ObservedCondition.written(condition)
        self._rules[item.name] = rule.model_copy(update={"status": RuleStatus(conditions=(written,))})

    def rule_counts(self, rule: DeviceTaintRule) -> RuleCounts:
        evicted = self.evicted_count(rule.metadata.uid)
        effect = rule.spec.taint.effect
        if effect not in (EFFECT_NO_EXECUTE, EFFECT_NONE) or rule.narrowing_fields:
            return RuleCounts(evicted_pods=evicted)
        pending = pending_pods(rule, self._claims, self._consumers())
        counts = RuleCounts(
            pending_pods=len(pending),
            pending_namespaces=len({namespace for namespace, _ in pending}),
            evicted_pods=evicted,
        )
        if effect == EFFECT_NONE:
            selector = rule.spec.device_selector
            counts = RuleCounts(
                pending_pods=counts.pending_pods,
                pending_namespaces=counts.pending_namespaces,
                evicted_pods=evicted,
                published_devices=published_devices(selector, self._pools),
                allocated_devices=allocated_devices(selector, self._claims),
            )
        return counts

    # --- Internals -----------------------------------------------------------------------------------

    def _claim_eviction(self, claim: ResourceClaim) -> PodEviction | None:
        return claim_eviction(claim, self._pools, (r for r in self._rules.values() if _evicts(r)))

    def _recompute_all_claims(self, now: datetime, effects: Effects) -> None:
        self._recompute(self._claims.values(), now, effects)

    def _recompute_claims_using(
        self, changes: dict[PoolId, set[str]], now: datetime, effects: Effects
    ) -> None:
        if not changes:
            return
        using = [
            entry
            for entry in self._claims.values()
            if any(
                result.device in changes.get((result.driver, result.pool), ())
                for result in entry.claim.results
            )
        ]
        self._recompute(using, now, effects)

    def _recompute(self, entries: Iterable[ClaimEntry], now: datetime, effects: Effects) -> None:
        changed: list[ResourceClaim] = []
        for entry in list(entries):
            eviction = self._claim_eviction(entry.claim)
            if eviction != entry.eviction:
                self._claims[entry.claim.key] = ClaimEntry(entry.claim, eviction)
                changed.append(entry.claim)
        self._reevaluate_consumers(changed, now, effects)

    def _reevaluate_consumers(self, claims: Iterable[ResourceClaim], now: datetime, effects: Effects) -> None:
        pods: dict[ObjectKey, Pod] = {}
        for claim in claims:
            for pod in self._consumers().of(claim):
                pods.setdefault(pod.key, pod)
        for pod in pods.values():
            self._reevaluate(pod, now, effects)

    def _reevaluate(self, pod: Pod, now: datetime, effects: Effects) -> None:
        item = pod_key(pod)
        eviction = pod_eviction(pod, self._claims, self.workload_claims)
        if eviction is None:
            if self._unschedule(item, effects):
                effects.cancelled.append(item)
            return
        if item.uid not in self._evicted_uids:
            # An evicted pod is not scheduled again, so it can never get a late "Cancelling deletion".
            self._scheduled[item] = eviction
            delay = max((eviction.when - now).total_seconds(), 0.0)
            effects.enqueue.append(Enqueue(item, delay))
        for reason in rule_reasons(eviction):
            effects.enqueue.append(_status_pass(reason))

    def _unschedule(self, item: Key, effects: Effects) -> bool:
        """Drop the pod's scheduled eviction, if it has one. Its rules count it as pending until
        their next status pass, which nothing else would queue when the pod goes before its
        toleration window ends (deleted, finished, no longer reserved): a rule went on saying "1 pod
        needs to be evicted" until some later event of its own."""
        eviction = self._scheduled.pop(item, None)
        for reason in rule_reasons(eviction):
            rule = self._rules.get(reason.rule_name)
            if rule is not None and rule.metadata.uid == reason.rule_uid:
                effects.enqueue.append(_status_pass(reason))
        return eviction is not None

    def _consumers(self) -> Consumers:
        return Consumers(self._pods, self._members, self.workload_claims)

    def _join_group(self, pod: Pod) -> None:
        if pod.pod_group_name:
            self._members.setdefault((pod.metadata.namespace, pod.pod_group_name), set()).add(pod.key)

    def _leave_group(self, pod: Pod) -> None:
        group = (pod.metadata.namespace, pod.pod_group_name)
        members = self._members.get(group)
        if members is not None:
            members.discard(pod.key)
            if not members:
                del self._members[group]

    def _forget(self, item: Key) -> None:
        self._scheduled.pop(item, None)
        self._evicted_uids[item.uid] = None
        self._evicted_uids.move_to_end(item.uid)
        while len(self._evicted_uids) > EVICTED_LRU_SIZE:
            self._evicted_uids.popitem(last=False)

    def _warn_once(
        self, kind: str, name: str, uid: str, generation: int, text: str, effects: Effects
    ) -> bool:
        """Log ``text`` unless this object's generation was warned about already; whether it was new."""
        if self._warned.get((kind, name)) == (uid, generation):
            return False
        self._warned[(kind, name)] = (uid, generation)
        effects.warnings.append(f"{kind} {name}: {text}")
        return True

    def _warn_undated_slice(self, resource_slice: ResourceSlice, effects: Effects) -> None:
        undated = sorted(
            device.name
            for device in resource_slice.spec.devices
            if any(t.effect == EFFECT_NO_EXECUTE and t.time_added is None for t in device.taints)
        )
        if undated:
            meta = resource_slice.metadata
            text = f"NoExecute taint without timeAdded ignored on device(s) {', '.join(undated)}"
            self._warn_once("ResourceSlice", meta.name, meta.uid, meta.generation, text, effects)

    def _warn_undated_rule(self, rule: DeviceTaintRule, effects: Effects) -> None:
        if _evicts(rule) and rule.spec.taint.time_added is None:
            meta = rule.metadata
            text = "NoExecute taint without timeAdded ignored"
            self._warn_once("DeviceTaintRule", meta.name, meta.uid, meta.generation, text, effects)

    def _warn_malformed_pacing(self, rule: DeviceTaintRule, effects: Effects) -> None:
        """Once per value: a malformed pacing annotation leaves the rule unpaced, with a log line
        and a Warning Event on the rule (a restarted process warns once more)."""
        meta = rule.metadata
        value = rule.evictions_per_minute
        if value is None or not malformed(value):
            self._pacing_warned.pop(meta.name, None)
            return
        if self._pacing_warned.get(meta.name) == (meta.uid, value):
            return
        self._pacing_warned[meta.name] = (meta.uid, value)
        text = malformed_text(value)
        effects.warnings.append(f"DeviceTaintRule {meta.name}: {text}")
        item = Key(RULE, "", meta.name, meta.uid)
        effects.rule_warnings.append(RuleWarning(item, REASON_INVALID_PACING, text))

    def _wake_paced_pods(self, rule: DeviceTaintRule, effects: Effects) -> None:
        """A changed pace applies at once to the pods that wait for the rule's tokens."""
        reason = RuleTaintReason(rule.metadata.name, rule.metadata.uid)
        for item, eviction in self._scheduled.items():
            if reason in eviction.reasons:
                effects.enqueue.append(Enqueue(item))

    def _warn_unsupported_selector(self, rule: DeviceTaintRule, effects: Effects) -> None:
        """Once per generation: a log line from each process, and a Warning Event unless the rule's
        condition shows that an earlier process already refused this generation (and posted one)."""
        narrowing = rule.narrowing_fields
        if not narrowing:
            return
        meta = rule.metadata
        text = unsupported_selector_text(narrowing)
        warned = self._warn_once("DeviceTaintRule", meta.name, meta.uid, meta.generation, text, effects)
        if warned and not says_unsupported(rule.eviction_condition, meta.generation):
            item = Key(RULE, "", meta.name, meta.uid)
            effects.rule_warnings.append(RuleWarning(item, REASON_UNSUPPORTED_SELECTOR, text))


def _status_pass(reason: RuleTaintReason) -> Enqueue:
    """The rule's status pass a period from now: by then the cache has seen what changed the count."""
    return Enqueue(Key(RULE, "", reason.rule_name, reason.rule_uid), _STATUS_DELAY)


def _evicts(rule: DeviceTaintRule | None) -> bool:
    return rule is not None and rule.spec.taint.effect == EFFECT_NO_EXECUTE and not rule.narrowing_fields
