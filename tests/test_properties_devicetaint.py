"""Properties of the devicetaint operator's cache and decisions on generated clusters (spec devicetaint.md).

A generated cluster has slices with tainted devices, DeviceTaintRules, claims allocated on those
devices (with tolerations) and reserved for pods that reference them.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_evictions_never_precede_their_taints``: 60
- ``test_no_pod_is_evicted_before_its_time``: 60
- ``test_the_cache_after_deletions_equals_a_fresh_one``: 40
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    claim_bodies,
    dns_subdomains,
    examples,
    pod_bodies,
    pod_consumer,
    pod_owner,
    rule_sets,
    slice_sets,
    times,
)

from operators.core.models import parse
from operators.devicetaint.cache import ClusterCache
from operators.devicetaint.evaluation import RuleTaintReason, SliceTaintReason, TaintReason
from operators.devicetaint.models import DeviceTaintRule, Pod, ResourceClaim, ResourceSlice, pod_key
from operators.devicetaint.podeviction import PodDone, PodEvict, PodNotYet

NS = "demo"


@dataclass
class World:
    slices: list[ResourceSlice]
    rules: list[DeviceTaintRule]
    claims: list[ResourceClaim]
    pods: list[Pod]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    slice_bodies = draw(slice_sets())
    # Eviction is about NoExecute, so most rules have that effect.
    rule_bodies = draw(rule_sets(slice_bodies, effects=("NoExecute", "NoExecute", "NoSchedule", "None")))
    claim_names = draw(
        st.lists(dns_subdomains("gpu-claim", "my-claim", "shared-claim"), min_size=1, max_size=3, unique=True)
    )
    pod_names = draw(st.lists(dns_subdomains("my-pod", "worker-0"), min_size=1, max_size=3, unique=True))
    pods = [draw(pod_bodies(NS, name, claim_names=claim_names)) for name in pod_names]
    for pod in pods:
        if draw(st.booleans()):
            # A running pod that uses a claim of the world: what eviction is about.
            pod["spec"]["nodeName"] = "node-1"
            entries = pod["spec"].setdefault("resourceClaims", [])
            entries.append({"name": "evictable", "resourceClaimName": draw(st.sampled_from(claim_names))})
    consumers = [pod_consumer(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]
    owners = [pod_owner(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]
    claims = [
        draw(claim_bodies(NS, name, slices=slice_bodies, owners=owners, consumers=consumers, allocated=True))
        for name in claim_names
    ]
    for pod in pods:
        entries = pod["spec"].get("resourceClaims") or []
        used = [entry["resourceClaimName"] for entry in entries if entry["name"] == "evictable"]
        for claim in claims:
            reserved = claim["status"].setdefault("reservedFor", [])
            known = {consumer["uid"] for consumer in reserved}
            uses = claim["metadata"]["name"] in used and pod["metadata"]["uid"] not in known
            if uses and draw(st.booleans()):
                reserved.append(pod_consumer(pod["metadata"]["name"], pod["metadata"]["uid"]))
    return World(
        slices=[parse(ResourceSlice, body) for body in slice_bodies],
        rules=[parse(DeviceTaintRule, body) for body in rule_bodies],
        claims=[parse(ResourceClaim, body) for body in claims],
        pods=[parse(Pod, body) for body in pods],
    )


def _fill(world: World, order: list[int], now: datetime) -> ClusterCache:
    """The cache after the world's events, kinds interleaved in the drawn ``order``."""
    cache = ClusterCache()
    for kind in order:
        if kind == 0:
            for resource_slice in world.slices:
                cache.apply_slice(resource_slice, now)
        elif kind == 1:
            for rule in world.rules:
                cache.apply_rule(rule, now)
        elif kind == 2:
            for claim in world.claims:
                cache.apply_claim(claim, now)
        else:
            for pod in world.pods:
                cache.apply_pod(pod, now)
    return cache


def _time_added(world: World, reason: TaintReason) -> datetime | None:
    if isinstance(reason, RuleTaintReason):
        rule = next(r for r in world.rules if r.metadata.uid == reason.rule_uid)
        return rule.spec.taint.time_added
    assert isinstance(reason, SliceTaintReason)
    resource_slice = next(s for s in world.slices if s.metadata.name == reason.slice_name)
    device = next(d for d in resource_slice.spec.devices if d.name == reason.device)
    return device.taints[reason.taint_index].time_added


@examples(60)
@given(worlds(), st.permutations(range(4)), times())
def test_evictions_never_precede_their_taints(world: World, order: list[int], now: datetime) -> None:
    """Spec devicetaint sections 6-8: a pod's scheduled eviction is never before the ``timeAdded`` of
    every taint it names (``tolerationSeconds`` only ever adds), does not depend on the order in
    which the watches delivered the objects, and a rule counts as pending as many pods as there are
    pods without ``deletionTimestamp`` whose eviction names the rule."""
    cache = _fill(world, order, now)
    reference = _fill(world, [0, 1, 2, 3], now)
    for pod in world.pods:
        item = pod_key(pod)
        eviction = cache.scheduled_eviction(item)
        assert eviction == reference.scheduled_eviction(item)
        if eviction is None:
            continue
        assert eviction.reasons
        added = [_time_added(world, reason) for reason in eviction.reasons]
        assert all(moment is not None for moment in added)
        assert eviction.when >= min(moment for moment in added if moment is not None)
    for rule in world.rules:
        if rule.spec.taint.effect != "NoExecute":
            continue
        reason = RuleTaintReason(rule.metadata.name, rule.metadata.uid)
        named = set()
        for pod in world.pods:
            eviction = cache.scheduled_eviction(pod_key(pod))
            if (
                eviction is not None
                and reason in eviction.reasons
                and pod.metadata.deletion_timestamp is None
            ):
                named.add(pod.key)
        assert cache.rule_counts(rule).pending_pods == len(named)


@examples(60)
@given(worlds(), times(), st.integers(0, 3 * 24 * 3600))
def test_no_pod_is_evicted_before_its_time(world: World, start: datetime, later: int) -> None:
    """Spec devicetaint section 9: deciding a pod before its eviction time waits (for exactly the
    time left), deciding it afterwards evicts it, and a pod without a scheduled eviction is never
    evicted."""
    cache = _fill(world, [0, 1, 2, 3], start)
    now = start + timedelta(seconds=later)
    for pod in world.pods:
        item = pod_key(pod)
        scheduled = cache.scheduled_eviction(item)
        decision = cache.decide_pod(item, now)
        if scheduled is None:
            assert isinstance(decision, PodDone)
        elif scheduled.when > now:
            assert isinstance(decision, PodNotYet)
            assert decision.delay == (scheduled.when - now).total_seconds()
        else:
            assert isinstance(decision, PodEvict)
            assert decision.eviction == scheduled


@examples(40)
@given(worlds(), times(), st.data())
def test_the_cache_after_deletions_equals_a_fresh_one(
    world: World, now: datetime, data: st.DataObject
) -> None:
    """Spec devicetaint section 8: after any slices, rules, claims and pods are deleted, the
    scheduled evictions and the rules' counts are those of a cache that only ever saw what is
    left, so no eviction outlives the taint, claim or pod it came from."""
    cache = _fill(world, [0, 1, 2, 3], now)
    kept = World(
        slices=[s for s in world.slices if data.draw(st.booleans(), label=f"keep slice {s.metadata.name}")],
        rules=[r for r in world.rules if data.draw(st.booleans(), label=f"keep rule {r.metadata.name}")],
        claims=[c for c in world.claims if data.draw(st.booleans(), label=f"keep claim {c.metadata.name}")],
        pods=[p for p in world.pods if data.draw(st.booleans(), label=f"keep pod {p.metadata.name}")],
    )
    for resource_slice in world.slices:
        if resource_slice not in kept.slices:
            cache.delete_slice(resource_slice, now)
    for rule in world.rules:
        if rule not in kept.rules:
            cache.delete_rule(rule, now)
    for claim in world.claims:
        if claim not in kept.claims:
            cache.delete_claim(claim, now)
    for pod in world.pods:
        if pod not in kept.pods:
            cache.delete_pod(pod)
    fresh = _fill(kept, [0, 1, 2, 3], now)
    for pod in world.pods:
        assert cache.scheduled_eviction(pod_key(pod)) == fresh.scheduled_eviction(pod_key(pod))
    for rule in kept.rules:
        assert cache.rule_counts(rule) == fresh.rule_counts(rule)
