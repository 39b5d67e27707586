"""The operator's cache: projections indexed per pool, each pool's answer kept until its inputs
change, requests keyed by (surface, name)."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable

import pytest
from poolstatus_builders import (
    claim,
    plain_devices,
    representative_scenarios,
    request_spec,
    resource_slice,
    result,
    taint_rule,
)

from operators.core.keys import CLAIM, Key
from operators.poolstatus.cache import ClusterCache
from operators.poolstatus.counts import Held
from operators.poolstatus.models import ResourcePoolStatusRequest
from operators.poolstatus.status import compute_pools
from operators.poolstatus.surfaces import BUILTIN, PROJECT


def request(name: str, driver: str = "gpu.example.com", done: bool = False) -> ResourcePoolStatusRequest:
    body: dict[str, object] = {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"driver": driver}}
    if done:
        body["status"] = {"poolCount": 0}
    return ResourcePoolStatusRequest.model_validate(body)


def totals(caches: ClusterCache, driver: str, with_rules: bool = False) -> list[tuple[str, int, int, int]]:
    """(pool, total, allocated, unavailable) per pool of ``driver``."""
    return [
        (
            p.status["poolName"],
            p.status["totalDevices"],
            p.status["allocatedDevices"],
            p.status["unavailableDevices"],
        )
        for p in caches.pool_results(request_spec(driver), with_rules)
    ]


def test_slices_are_indexed_by_pool_and_follow_a_driver_change() -> None:
    caches = ClusterCache()
    assert caches.put_slice(resource_slice("s", plain_devices(1), driver="a.com")) == {"a.com"}
    assert caches.put_slice(resource_slice("s", plain_devices(2), driver="b.com")) == {"a.com", "b.com"}
    assert totals(caches, "a.com") == []
    assert totals(caches, "b.com") == [("pool-1", 2, 0, 0)]
    assert caches.remove_slice("s") == {"b.com"}
    assert caches.remove_slice("s") == set()
    assert totals(caches, "b.com") == []
    assert caches.slice_names() == set()


def test_only_what_allocated_claims_hold_is_kept() -> None:
    caches = ClusterCache()
    caches.put_slice(resource_slice("s", plain_devices(2), driver="b.com"))
    caches.put_claim(
        claim(
            "c1",
            result("device-0", driver="a.com"),
            result("device-1", driver="b.com"),
            result("x", admin=True),
        )
    )
    caches.put_claim(claim("c2"))  # no results: cannot allocate anything
    assert caches.claims == {
        Key(CLAIM, "default", "c1"): (
            Held("a.com", "pool-1", "device-0"),
            Held("b.com", "pool-1", "device-1"),
        )
    }
    assert totals(caches, "b.com") == [("pool-1", 2, 1, 0)]
    caches.put_claim(claim("c1", result("device-0", driver="a.com")))
    assert totals(caches, "b.com") == [("pool-1", 2, 0, 0)]
    caches.remove_claim(Key(CLAIM, "default", "c1"))
    assert caches.claims == {}


def test_rules_only_when_in_use_and_a_rule_change_is_seen() -> None:
    caches = ClusterCache()
    caches.put_slice(resource_slice("s", plain_devices(2), driver="x"))
    assert totals(caches, "x", with_rules=True) == [("pool-1", 2, 0, 0)]
    caches.put_rule(taint_rule("r", "NoSchedule", {}))
    assert totals(caches, "x", with_rules=True) == [("pool-1", 2, 0, 2)]
    assert totals(caches, "x", with_rules=False) == [("pool-1", 2, 0, 0)]
    caches.remove_rule("r")
    assert totals(caches, "x", with_rules=True) == [("pool-1", 2, 0, 0)]


def test_resource_versions_recognise_redeliveries() -> None:
    caches = ClusterCache()
    caches.put_slice(resource_slice("s", plain_devices(1)), "5")
    caches.put_claim(claim("c", result("device-0")), "6")
    assert caches.slice_unchanged("s", "5")
    assert not caches.slice_unchanged("s", "7")
    assert caches.claim_unchanged(Key(CLAIM, "default", "c"), "6")
    assert not caches.claim_unchanged(Key(CLAIM, "default", "c"), "")
    caches.remove_claim(Key(CLAIM, "default", "c"))
    caches.remove_slice("s")
    assert not caches.claim_unchanged(Key(CLAIM, "default", "c"), "6")
    assert not caches.slice_unchanged("s", "5")


def test_equal_quantities_of_another_format_are_a_change() -> None:
    """The sums print the format of their first term, so 1Gi -> 1073741824 must be seen."""
    caches = ClusterCache()
    nic = {"name": "nic", "allowMultipleAllocations": True, "capacity": {"bw": {"value": "10Gi"}}}
    caches.put_slice(resource_slice("s", [nic]))
    caches.put_claim(claim("c", result("nic", consumed={"bw": "1Gi"})))
    [before] = caches.pool_results(request_spec(), False)
    caches.put_claim(claim("c", result("nic", consumed={"bw": "1073741824"})))
    [after] = caches.pool_results(request_spec(), False)
    consumed = [p.status["shareableSummary"]["capacity"][0]["consumed"] for p in (before, after)]
    assert consumed == ["1Gi", "1073741824"]


@pytest.mark.parametrize("name", sorted(representative_scenarios()))
def test_kept_answers_equal_a_fresh_computation(name: str) -> None:
    """Fed in any order, removed and fed again piece by piece, the cache answers exactly what
    compute_pools answers on the same objects at every step."""
    scenario = representative_scenarios()[name]
    spec = scenario.spec
    rng = random.Random(name)
    caches = ClusterCache()

    def check() -> None:
        slices = [s for s in scenario.slices if s.metadata.name in caches.slice_names()]
        claims = [
            c
            for c in scenario.claims
            if Key(CLAIM, c.metadata.namespace or "", c.metadata.name) in caches.claims
        ]
        expected = compute_pools(spec, slices, claims, list(caches.rules.values()))
        assert json.dumps([p.status for p in caches.pool_results(spec, True)]) == json.dumps(
            [p.status for p in expected]
        )

    # (add, remove) per object, so that any order of additions and removals can be replayed.
    steps: list[tuple[Callable[[], object], Callable[[], object]]] = []
    for s in scenario.slices:
        steps.append(
            (functools.partial(caches.put_slice, s), functools.partial(caches.remove_slice, s.metadata.name))
        )
    for c in scenario.claims:
        key = Key(CLAIM, c.metadata.namespace or "", c.metadata.name)
        steps.append((functools.partial(caches.put_claim, c), functools.partial(caches.remove_claim, key)))
    for r in scenario.rules:
        steps.append(
            (functools.partial(caches.put_rule, r), functools.partial(caches.remove_rule, r.metadata.name))
        )
    for _ in range(2):
        rng.shuffle(steps)
        for add, _remove in steps:
            add()
            check()
        for _add, remove in steps[: len(steps) // 2]:
            remove()
            check()


def test_requests_of_both_surfaces_are_independent() -> None:
    caches = ClusterCache()
    caches.put_request(BUILTIN, request("check-gpus"))
    caches.put_request(PROJECT, request("check-gpus", done=True))
    caches.put_request(PROJECT, request("other", driver="b.com"))
    assert set(caches.requests) == {
        ("resource.k8s.io", "check-gpus"),
        ("dra-operators.io", "check-gpus"),
        ("dra-operators.io", "other"),
    }
    assert [e.key for e in caches.pending_of_driver("gpu.example.com")] == [("resource.k8s.io", "check-gpus")]
    assert (caches.pending_count("resource.k8s.io"), caches.pending_count("dra-operators.io")) == (1, 1)
    removed = caches.remove_request(("resource.k8s.io", "check-gpus"))
    assert removed is not None
    assert removed.uid == "uid-check-gpus"
    assert caches.pending_count("resource.k8s.io") == 0
