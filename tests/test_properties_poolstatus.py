"""Properties of the pool-status computation on generated clusters (spec poolstatus.md).

A generated cluster has pools of several generations, complete or not, with partitionable
devices (shared counters, counter consumption, compatibility groups), shareable devices with
capacities, taints, claims allocated on published and vanished devices (admin access and
consumed capacity included) and DeviceTaintRules.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_counts_sum_to_the_total``: 100
- ``test_the_status_does_not_depend_on_input_order``: 50
- ``test_one_set_partitions_fit_by_division``: 150
- ``test_the_cache_answers_as_a_fresh_computation``: 60
- ``test_quantities_far_apart_make_a_pool_error_at_once``: 50
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from random import Random

from hypothesis import example, given, settings
from hypothesis import strategies as st
from poolstatus_builders import claim as claim_on
from poolstatus_builders import device, request_spec
from poolstatus_builders import resource_slice as slice_of
from poolstatus_builders import result as allocated_to
from strategies import (
    Body,
    claim_bodies,
    dns_subdomains,
    examples,
    pool_status_requests,
    rule_sets,
    slice_sets,
)

from operators.core.keys import CLAIM, Key
from operators.core.models import parse
from operators.dra.pools import current_slices
from operators.dra.quantity import MAX_EXACT_DIGITS, parse_quantity
from operators.poolstatus.cache import ClusterCache
from operators.poolstatus.models import DeviceTaintRule, RequestSpec, ResourceClaim, ResourceSlice
from operators.poolstatus.status import Completed, Deferred, compute_pools, decide

WRITTEN_AT = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)
PROFILE = "gpu.example.com/profile"


@dataclass
class World:
    spec: RequestSpec
    slices: list[ResourceSlice]
    claims: list[ResourceClaim]
    rules: list[DeviceTaintRule]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    slice_bodies = draw(slice_sets())
    names = draw(st.lists(dns_subdomains("claim-0", "claim-1", "claim-2"), max_size=4, unique=True))
    claims = [
        draw(claim_bodies(namespace, name, slices=slice_bodies)) for name in names for namespace in ["demo"]
    ]
    return World(
        spec=RequestSpec.model_validate(draw(pool_status_requests(slice_bodies))),
        slices=[parse(ResourceSlice, body) for body in slice_bodies],
        claims=[parse(ResourceClaim, body) for body in claims],
        rules=[parse(DeviceTaintRule, body) for body in draw(rule_sets(slice_bodies))],
    )


@examples(100)
@given(worlds(), st.floats(0, 60), st.integers(1, 2**20))
def test_counts_sum_to_the_total(world: World, elapsed: float, max_bytes: int) -> None:
    """Sections 7.4-7.7, 9 and 11 (decisions D5, D6): for every complete pool, ``totalDevices`` is the
    number of devices its newest slices publish and equals allocated + available + unavailable;
    every shareable capacity is non-negative, with ``available`` = max(total - consumed, 0); a
    partition type's allocatable count lies between 0 and its total. Deciding never fails, and a
    written status lists at most ``limit`` pools."""
    pools = compute_pools(world.spec, world.slices, world.claims, world.rules)
    for result in pools:
        status = result.status
        assert status["driver"] == world.spec.driver
        if not result.complete:
            assert status["validationError"]
            continue
        members = [
            s
            for s in world.slices
            if (s.spec.driver, s.spec.pool.name) == (status["driver"], status["poolName"])
        ]
        published = sum(len(s.spec.devices) for s in current_slices(members))
        assert status["totalDevices"] == published
        parts = status["allocatedDevices"] + status["availableDevices"] + status["unavailableDevices"]
        assert status["totalDevices"] == parts
        assert min(status["allocatedDevices"], status["availableDevices"], status["unavailableDevices"]) >= 0
        for entry in status.get("shareableSummary", {}).get("capacity", []):
            total, consumed, available = (
                parse_quantity(entry[key]) for key in ("total", "consumed", "available")
            )
            assert min(total.sign(), consumed.sign(), available.sign()) >= 0
            assert available == (total - consumed).non_negative()
        shareable = status.get("shareableSummary")
        if shareable is not None:
            assert (
                0 <= shareable["fullyAvailableDevices"] + shareable["partiallyAvailableDevices"] <= published
            )
        for entry in status.get("partitionSummary", []):
            assert 0 <= entry["allocatable"] <= entry["total"]

    evaluation = decide(
        world.spec, pools, now=elapsed, first_seen=0.0, written_at=WRITTEN_AT, max_status_bytes=max_bytes
    )
    if isinstance(evaluation, Deferred):
        assert evaluation.retry_after > 0
        assert any(not result.complete for result in pools[: world.spec.effective_limit])
        return
    assert isinstance(evaluation, Completed)
    assert len(evaluation.status.get("pools", [])) <= world.spec.effective_limit
    assert evaluation.status["conditions"]


@examples(50)
@given(worlds(), st.randoms(use_true_random=False))
def test_the_status_does_not_depend_on_input_order(world: World, random: Random) -> None:
    """Section 7.3 and decision D8: the same snapshot in any order gives the same pool statuses."""
    slices, claims, rules = list(world.slices), list(world.claims), list(world.rules)
    random.shuffle(slices)
    random.shuffle(claims)
    random.shuffle(rules)
    expected = [
        result.status for result in compute_pools(world.spec, world.slices, world.claims, world.rules)
    ]
    assert [result.status for result in compute_pools(world.spec, slices, claims, rules)] == expected


@st.composite
def one_set_partitions(draw: st.DrawFn) -> tuple[World, int, int, int]:
    """One pool whose devices all draw ``cost`` from the single counter of its single set, some of
    them allocated: (world, counter value in GiB, cost in GiB, devices in use)."""
    value = draw(st.integers(0, 64))
    cost = draw(st.integers(1, 16))
    count = draw(st.integers(1, 12))
    names = [f"gpu-0-part-{index}" for index in range(count)]
    counters: Body = {"name": "gpu-0-set", "counters": {"memory": {"value": f"{value}Gi"}}}
    consumes = [{"counterSet": "gpu-0-set", "counters": {"memory": {"value": f"{cost * 1024}Mi"}}}]
    devices = [
        {"name": name, "attributes": {"profile": {"string": "part"}}, "consumesCounters": consumes}
        for name in names
    ]
    specs: list[Body] = [{"sharedCounters": [counters]}, {"devices": devices}]
    slices = [
        {
            "metadata": {"name": f"pool-1-{index}"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
                "nodeName": "node-1",
                **spec,
            },
        }
        for index, spec in enumerate(specs)
    ]
    allocated = draw(st.lists(st.sampled_from(names), unique=True))
    claims = [
        {
            "metadata": {"name": f"claim-{name}", "namespace": "demo"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r", "driver": "gpu.example.com", "pool": "pool-1", "device": name}
                        ]
                    }
                }
            },
        }
        for name in allocated
    ]
    world = World(
        spec=RequestSpec(
            driver="gpu.example.com", default_partition_type_attribute="gpu.example.com/profile"
        ),
        slices=[parse(ResourceSlice, body) for body in slices],
        claims=[parse(ResourceClaim, body) for body in claims],
        rules=[],
    )
    return world, value, cost, len(allocated)


@examples(150)
@given(one_set_partitions())
def test_one_set_partitions_fit_by_division(case: tuple[World, int, int, int]) -> None:
    """Section 9, step 7: with one counter set and no compatibility groups, a type's allocatable
    count is min(devices not in use, floor(what the devices in use left / cost)), and never negative."""
    world, value, cost, in_use = case
    (result,) = compute_pools(world.spec, world.slices, world.claims, world.rules)
    (entry,) = result.status["partitionSummary"]
    total = len(world.slices[1].spec.devices)
    assert entry["total"] == total
    assert entry["allocatable"] == min(total - in_use, max(value - cost * in_use, 0) // cost)


@examples(60)
@given(worlds(), worlds(), st.data())
def test_the_cache_answers_as_a_fresh_computation(world: World, later: World, data: st.DataObject) -> None:
    """Sections 6.2-6.4 (cache.py): the pool results the cache keeps equal ``compute_pools`` on the
    same objects, after objects of the same names are replaced and others removed, with and without
    DeviceTaintRules, for any request."""
    cache = ClusterCache()
    slices = {s.metadata.name: s for s in world.slices}
    claims = {Key(CLAIM, c.metadata.namespace or "", c.metadata.name): c for c in world.claims}
    rules = {r.metadata.name: r for r in world.rules}
    for resource_slice in [*world.slices, *later.slices]:
        cache.put_slice(resource_slice)
        slices[resource_slice.metadata.name] = resource_slice
    for claim in world.claims:
        cache.put_claim(claim)
    # An answer kept before the changes must not survive them.
    cache.pool_results(world.spec, True)
    for claim in later.claims:
        cache.put_claim(claim)
        claims[Key(CLAIM, claim.metadata.namespace or "", claim.metadata.name)] = claim
    for rule in [*world.rules, *later.rules]:
        cache.put_rule(rule)
        rules[rule.metadata.name] = rule
    for name in sorted(slices):
        if data.draw(st.booleans(), label=f"remove slice {name}"):
            cache.remove_slice(name)
            del slices[name]
    for key in sorted(claims):
        if data.draw(st.booleans(), label=f"remove claim {key}"):
            cache.remove_claim(key)
            del claims[key]
    for name in sorted(rules):
        if data.draw(st.booleans(), label=f"remove rule {name}"):
            cache.remove_rule(name)
            del rules[name]
    for spec in (world.spec, later.spec):
        for with_rules in (True, False):
            fresh = compute_pools(
                spec, slices.values(), claims.values(), rules.values() if with_rules else ()
            )
            assert [r.status for r in cache.pool_results(spec, with_rules)] == [r.status for r in fresh]


@settings(examples(50), deadline=timedelta(milliseconds=250))
@given(st.integers(MAX_EXACT_DIGITS + 1, 2**31 - 1), st.integers(1, 3), st.booleans())
@example(2**31 - 1, 2, False)
@example(5000, 2, False)
def test_quantities_far_apart_make_a_pool_error_at_once(exponent: int, count: int, allocated: bool) -> None:
    """Sections 9, 11 and 12: a driver may publish a counter or a capacity of ``1e<exponent>`` (any
    exponent up to 2**31 - 1 parses) beside amounts of 1. Each example has a deadline: the pools get
    the view's validationError with their counts, and nothing expands ``10**exponent``."""
    huge = f"1e{exponent}"
    parts = [
        device(f"part-{i}", attributes={"profile": "p"}, consumes=[("set", {"c": "1"})]) for i in range(count)
    ]
    nics = [device(f"nic-{i}", shareable=True, capacity={"c": "1"}) for i in range(count)]
    nics.append(device("nic-huge", shareable=True, capacity={"c": huge}))
    slices = [
        slice_of("a", parts, pool="a", partition_attribute=PROFILE, shared_counters={"set": {"c": huge}}),
        slice_of("b", nics, pool="b"),
    ]
    claims = [
        claim_on("c-a", allocated_to("part-0", pool="a")),
        claim_on("c-b", allocated_to("nic-huge", pool="b", consumed={"c": "1"})),
    ]
    pool_a, pool_b = (r.status for r in compute_pools(request_spec(), slices, claims if allocated else []))
    assert pool_a["validationError"].startswith('PartitionCounterOutOfRange: counter "c" of counter set')
    assert pool_b["validationError"].startswith('ShareableCapacityOutOfRange: capacity "c"')
    assert "partitionSummary" not in pool_a
    assert "shareableSummary" not in pool_b
    assert pool_a["allocatedDevices"] == pool_b["allocatedDevices"] == int(allocated)
