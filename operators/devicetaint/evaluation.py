"""Which taints hit a claim, which claims affect a pod, and which pods a rule keeps pending (spec §5-§7).

Everything here reads the cache and returns values; :mod:`.cache` decides when to call it.

A claim's eviction depends only on its allocation (immutable once set), the visible slice taints of
its devices and the NoExecute rules, so it is computed once per change of those and cached next to the
claim. A pod's eviction merges the cached evictions of the claims that affect it: cheap enough to redo
on every pod event.

The pending pods of a rule are found from the claims rather than by scanning every pod: a pod is
pending for rule R exactly when some claim affecting it has R among its reasons, and a taint is a
reason independently of any other taint. The same walk therefore answers the dry run of an
``effect: None`` rule, by reading its taint as ``NoExecute``, without building a simulated cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from operators.dra.claims import ResultWithTolerations
from operators.dra.podgroups import controlled_by_group_of, is_pod_group_consumer, reserved_for_group_of
from operators.dra.taintrules import RuleDeviceSelector, rule_matches
from operators.dra.taints import (
    EFFECT_NO_EXECUTE,
    DeviceTaint,
    Eviction,
    earliest_eviction,
    merge_evictions,
    taint_eviction_time,
)

from .models import DeviceTaintRule, Pod, ResourceClaim
from .pools import PoolIndex


@dataclass(frozen=True)
class RuleTaintReason:
    rule_name: str
    rule_uid: str

    def __str__(self) -> str:
        return f"DeviceTaintRule {self.rule_name}"


@dataclass(frozen=True)
class SliceTaintReason:
    driver: str
    pool: str
    device: str
    taint_index: int
    slice_name: str

    def __str__(self) -> str:
        device = f"{self.driver}/{self.pool}/{self.device}"
        return f"ResourceSlice {self.slice_name} {device} taint #{self.taint_index}"


TaintReason = RuleTaintReason | SliceTaintReason
PodEviction = Eviction[TaintReason]
ObjectKey = tuple[str, str]
"""(namespace, name)"""


def reason_order(reason: TaintReason) -> tuple[int, str, str, str, int]:
    """Rules first by name, then slice taints by driver, pool, device and index (spec §6, logs)."""
    if isinstance(reason, RuleTaintReason):
        return (0, reason.rule_name, "", "", 0)
    return (1, reason.driver, reason.pool, reason.device, reason.taint_index)


def describe_reasons(reasons: Iterable[TaintReason]) -> str:
    return ", ".join(str(reason) for reason in sorted(reasons, key=reason_order))


def rule_reasons(eviction: PodEviction | None) -> list[RuleTaintReason]:
    if eviction is None:
        return []
    rules = (reason for reason in eviction.reasons if isinstance(reason, RuleTaintReason))
    return sorted(rules, key=reason_order)


@dataclass(frozen=True)
class ClaimEntry:
    """An allocated claim and its cached eviction."""

    claim: ResourceClaim
    eviction: PodEviction | None


# --- Claims ------------------------------------------------------------------------------------------


def evicting_taints(
    result: ResultWithTolerations, pools: PoolIndex, rules: Iterable[DeviceTaintRule]
) -> Iterator[tuple[DeviceTaint, TaintReason]]:
    """The NoExecute taints on an allocated device: its visible slice taints, then matching rules.

    Rules match the allocation result itself, so they still apply when no slice lists the device. A
    rule whose selector narrows beyond driver, pool and device matches nothing (:func:`rule_selects`).
    """
    pool = pools.get((result.driver, result.pool))
    found = pool.device(result.device) if pool else None
    if found is not None:
        resource_slice, device = found
        for index, taint in enumerate(device.taints):
            if taint.effect == EFFECT_NO_EXECUTE:
                reason = SliceTaintReason(
                    result.driver, result.pool, device.name, index, resource_slice.metadata.name
                )
                yield taint, reason
    for rule in rules:
        if rule.spec.taint.effect == EFFECT_NO_EXECUTE and rule_selects(rule.spec.device_selector, result):
            yield rule.spec.taint, RuleTaintReason(rule.metadata.name, rule.metadata.uid)


def claim_eviction(
    claim: ResourceClaim, pools: PoolIndex, rules: Iterable[DeviceTaintRule]
) -> PodEviction | None:
    rule_list = list(rules)
    return earliest_eviction(
        (result.tolerations, taint, reason)
        for result in claim.results
        for taint, reason in evicting_taints(result, pools, rule_list)
    )


def rule_selects(selector: RuleDeviceSelector | None, result: ResultWithTolerations) -> bool:
    """Only by driver, pool and device, as Kubernetes 1.35 and later match; a selector that also
    names a class or CEL selectors selects nothing here, never more than it means."""
    return rule_matches(selector, result.driver, result.pool, result.device)


# --- Pods --------------------------------------------------------------------------------------------


def referenced_claims(pod: Pod) -> Iterator[tuple[str, bool]]:
    """(claim name, whether the claim must be controlled by the pod) for every claim the pod names.

    A template entry names the claim recorded for it in the pod status, or nothing yet. The claim of
    an extended resource is named in the status too; such claims are evicted like any other (ours,
    spec §16 row 2).
    """
    recorded = {status.name: status.resource_claim_name for status in pod.status.resource_claim_statuses}
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name is not None:
            yield entry.resource_claim_name, False
        elif entry.resource_claim_template_name is not None:
            name = recorded.get(entry.name)
            if name:
                yield name, True
    extended = pod.status.extended_resource_claim_status
    if extended is not None and extended.resource_claim_name:
        yield extended.resource_claim_name, True


def claim_references(pod: Pod) -> dict[str, bool]:
    """:func:`referenced_claims` once per claim name, in order: whether the pod must control the
    claim. A claim the pod also names directly needs no control, as any reference is enough."""
    references: dict[str, bool] = {}
    for name, must_own in referenced_claims(pod):
        references[name] = references.get(name, True) and must_own
    return references


def pod_affected_by(pod: Pod, claim: ResourceClaim, workload_claims: bool = False) -> bool:
    """Spec §7: scheduled, referencing the claim (owned by the pod where required), allocated, reserved.

    Where PodGroup claims are on, a member also uses the claims of its group: one its group owns
    counts as its own, and one reserved for its group counts as reserved for it, as upstream's
    ``IsForPod`` and ``IsReservedForPod`` read them.
    """
    return _affected_by(pod, claim, claim_references(pod), workload_claims)


def _affected_by(
    pod: Pod, claim: ResourceClaim, references: Mapping[str, bool], workload_claims: bool
) -> bool:
    """:func:`pod_affected_by` with the pod's :func:`claim_references`, which a caller asking about
    many claims of one pod reads once: a tenant sets how many claims a pod references."""
    if not pod.spec.node_name or claim.status.allocation is None:
        return False
    if claim.metadata.namespace != pod.metadata.namespace:
        return False
    uid = pod.metadata.uid
    group = pod.pod_group_name if workload_claims else ""

    def owned() -> bool:
        owners = claim.metadata.owner_references
        return claim.metadata.controlled_by(uid) or controlled_by_group_of(group, owners)

    must_own = references.get(claim.metadata.name)
    referenced = must_own is not None and (not must_own or owned())
    return referenced and any(
        consumer.uid == uid or reserved_for_group_of(group, consumer)
        for consumer in claim.status.reserved_for
    )


def pod_eviction(
    pod: Pod, claims: Mapping[ObjectKey, ClaimEntry], workload_claims: bool = False
) -> PodEviction | None:
    """The earliest eviction over the claims that affect the pod, with the union of their reasons."""
    entries: dict[ObjectKey, ClaimEntry] = {}
    references = claim_references(pod)
    for name in references:
        entry = claims.get((pod.metadata.namespace, name))
        if entry is not None and _affected_by(pod, entry.claim, references, workload_claims):
            entries[entry.claim.key] = entry
    return merge_evictions(entry.eviction for entry in entries.values())


def due_reasons(
    pod: Pod,
    claims: Mapping[ObjectKey, ClaimEntry],
    pools: PoolIndex,
    rules: Iterable[DeviceTaintRule],
    now: datetime,
    workload_claims: bool = False,
) -> set[TaintReason]:
    """The taints that make the pod due at ``now``; a pod's eviction keeps only the earliest time,
    but eviction pacing must know whether a taint that is not paced is among them."""
    rule_list = list(rules)
    due: set[TaintReason] = set()
    references = claim_references(pod)
    for name in references:
        entry = claims.get((pod.metadata.namespace, name))
        if entry is None or not _affected_by(pod, entry.claim, references, workload_claims):
            continue
        for result in entry.claim.results:
            for taint, reason in evicting_taints(result, pools, rule_list):
                moment = taint_eviction_time(result.tolerations, taint)
                if moment is not None and moment <= now:
                    due.add(reason)
    return due


@dataclass(frozen=True)
class Consumers:
    """The cached pods, and (where PodGroup claims are on) each group's members by group key."""

    pods: Mapping[ObjectKey, Pod]
    members: Mapping[ObjectKey, Iterable[ObjectKey]]
    workload_claims: bool = False

    def of(self, claim: ResourceClaim) -> Iterator[Pod]:
        """The cached pods in ``reservedFor`` (a pod of the same name but another UID is not the
        consumer) and the members of a PodGroup there."""
        namespace = claim.metadata.namespace
        for consumer in claim.status.reserved_for:
            if consumer.is_pod:
                pod = self.pods.get((namespace, consumer.name))
                if pod is not None and pod.metadata.uid == consumer.uid:
                    yield pod
            elif self.workload_claims and is_pod_group_consumer(consumer):
                for key in self.members.get((namespace, consumer.name), ()):
                    member = self.pods.get(key)
                    if member is not None:
                        yield member


# --- Rules -------------------------------------------------------------------------------------------


def pending_pods(
    rule: DeviceTaintRule, claims: Mapping[ObjectKey, ClaimEntry], consumers: Consumers
) -> set[ObjectKey]:
    """Pods without ``deletionTimestamp`` that the rule's taint would evict, read as NoExecute.

    Pods still inside their ``tolerationSeconds`` window count: they are pending, just not yet due.
    """
    taint = rule.spec.taint.model_copy(update={"effect": EFFECT_NO_EXECUTE})
    selector = rule.spec.device_selector
    pending: set[ObjectKey] = set()
    # A pod is the consumer of each of its claims the rule hits.
    references_of: dict[ObjectKey, dict[str, bool]] = {}
    for entry in claims.values():
        hit = any(
            rule_selects(selector, result) and taint_eviction_time(result.tolerations, taint) is not None
            for result in entry.claim.results
        )
        if not hit:
            continue
        for pod in consumers.of(entry.claim):
            if pod.metadata.deletion_timestamp is not None or pod.key in pending:
                continue
            references = references_of.get(pod.key)
            if references is None:
                references = references_of[pod.key] = claim_references(pod)
            if _affected_by(pod, entry.claim, references, consumers.workload_claims):
                pending.add(pod.key)
    return pending


def published_devices(selector: RuleDeviceSelector | None, pools: PoolIndex) -> int:
    return sum(
        1
        for (driver, pool_name), pool in pools.items()
        for device_name in pool.visible_devices()
        if rule_matches(selector, driver, pool_name, device_name)
    )


def allocated_devices(selector: RuleDeviceSelector | None, claims: Mapping[ObjectKey, ClaimEntry]) -> int:
    """Matching allocation results; a device shared by several claims counts once per claim."""
    return sum(
        1 for entry in claims.values() for result in entry.claim.results if rule_selects(selector, result)
    )
