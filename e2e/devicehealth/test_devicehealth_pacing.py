"""devicehealth e2e: a policy's ``evictionsPerMinute`` paces the evictions of all its rules together
(docs/device-health.md, Behaviour, 6; the issue's "20 pods on tainted devices with
evictionsPerMinute: 6").

The driver's signal is a ``None`` taint on two devices of a fake node's slice; the policy taints
both ``NoExecute``, so two rules, owned by the one policy, share its token bucket: 20 pods (ten on
each device) go one every 10 s, the last about 190 s after the first, and each rule's
``EvictionInProgress`` condition reads upstream's pending text while its pods wait. The fake node
(devicetaint's world: pods bound by ``nodeName``, claims allocated as admin) is enough, because
devicehealth reads the slice taint and devicetaint evicts by the API; the real node's story is in
test_devicehealth.py.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.kube import Kube, wait_for
from e2e.devicehealth.support import POLICIES, POLICY_UID_LABEL, RULES
from e2e.devicetaint.world import PENDING_MESSAGE as PENDING
from e2e.devicetaint.world import PodPlan, World, create_bulk, open_world
from e2e.support import Tracker
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

pytestmark = pytest.mark.timeout(420)

PER_MINUTE = 6
INTERVAL = 60.0 / PER_MINUTE
SICK = ("gpu-0", "gpu-1")
HEALTHY = "gpu-2"
PODS_PER_DEVICE = 10
PODS = PODS_PER_DEVICE * len(SICK)
SIGNAL = {"key": "dra-operators.test/unhealthy", "value": "ecc", "effect": "None"}
ANNOTATION = EVICTIONS_PER_MINUTE
# One poll's latency on each of two observations, and the reconcile after a token is due.
TOLERANCE = 2.0
TIMEOUT = (PODS - 1) * INTERVAL + 60.0


@pytest.fixture
def world(api: Kube, objects: Tracker, namespace: str, unique_name: Callable[[str], str]) -> Iterator[World]:
    with open_world(api, objects, unique_name("node"), namespace) as opened:
        yield opened


def test_a_policys_rules_share_one_bucket_and_read_upstreams_message_while_pods_wait(
    api: Kube,
    objects: Tracker,
    world: World,
    namespace: str,
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    pool = unique_name("pool")
    world.resource_slice(
        unique_name("slice"), driver_name, pool, [*SICK, HEALTHY], taints={d: [SIGNAL] for d in SICK}
    )
    device_of = {f"paced-{d}-{i}": d for d in SICK for i in range(PODS_PER_DEVICE)}
    create_bulk(world, [PodPlan(name, driver_name, pool, d) for name, d in device_of.items()])
    world.allocated_pod("bystander", driver_name, pool, [HEALTHY])

    with operator("devicetaint"), operator("devicehealth"):
        name = unique_name("paced")
        uid = objects.create(
            POLICIES,
            {
                "apiVersion": "dra-operators.io/v1alpha1",
                "kind": "DeviceHealthPolicy",
                "metadata": {"name": name},
                "spec": {
                    "scope": {"driver": driver_name},
                    "signals": {"sliceTaint": {"key": SIGNAL["key"], "effects": ["None"]}, "after": "0s"},
                    "action": {"effect": "NoExecute", "clearAfter": "Never"},
                    "maxUnavailable": len(SICK),
                    "evictionsPerMinute": PER_MINUTE,
                },
            },
        )["metadata"]["uid"]

        def both_rules() -> dict[str, str]:
            rules = api.list(RULES, labelSelector=f"{POLICY_UID_LABEL}={uid}")
            found = {r["spec"]["deviceSelector"]["device"]: r["metadata"]["name"] for r in rules}
            return found if len(found) == len(SICK) else {}

        rule_of = wait_for(both_rules, 60, "the policy's two rules")
        for rule_name in rule_of.values():
            rule = api.get(f"{RULES}/{rule_name}")
            assert rule["metadata"]["annotations"][ANNOTATION] == str(PER_MINUTE)
            assert rule["metadata"]["ownerReferences"][0]["uid"] == uid
            assert rule["spec"]["taint"]["effect"] == "NoExecute"

        evicted_at: dict[str, float] = {}
        messages: dict[str, list[str]] = {d: [] for d in SICK}
        deadline = time.monotonic() + TIMEOUT
        while len(evicted_at) < PODS and time.monotonic() < deadline:
            # The rules before the pods: a rule seen Completed while one of its pods still waits
            # would then be the operator's fault, never the order of the two reads.
            rules = {
                r["metadata"]["name"]: r for r in api.list(RULES, labelSelector=f"{POLICY_UID_LABEL}={uid}")
            }
            now = time.monotonic()
            for pod in api.list(f"/api/v1/namespaces/{namespace}/pods"):
                if pod["metadata"].get("deletionTimestamp"):
                    evicted_at.setdefault(pod["metadata"]["name"], now)
            for device, rule_name in rule_of.items():
                waiting = [p for p, d in device_of.items() if d == device and p not in evicted_at]
                found = _eviction_condition(rules.get(rule_name, {}))
                if not waiting or found is None:
                    continue
                assert (found["status"], found["reason"]) == ("True", "PodsPendingEviction"), (device, found)
                assert PENDING.fullmatch(found["message"]), (device, found["message"])
                messages[device].append(found["message"])
            time.sleep(0.5)
        assert len(evicted_at) == PODS, f"only {len(evicted_at)} of {PODS} evicted in {TIMEOUT:.0f}s"
        for rule_name in rule_of.values():
            world.wait_rule(
                rule_name,
                "False",
                "Completed",
                f"{PODS_PER_DEVICE} pods evicted since starting the controller.",
                30.0,
            )
        assert set(evicted_at) == set(device_of), "only the pods of the tainted devices go"
        assert not (world.pod_now("bystander") or {}).get("metadata", {}).get("deletionTimestamp")

    times = sorted(evicted_at.values())
    offsets = [round(t - times[0], 1) for t in times]
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(times)]
    order = "".join(str(SICK.index(device_of[p])) for p in sorted(evicted_at, key=lambda p: evicted_at[p]))
    readings = {d: len(m) for d, m in messages.items()}
    print(f"policy pacing: {PODS} evictions over {offsets[-1]:.1f}s, offsets {offsets}, gaps {gaps}")
    print(f"policy pacing: devices in eviction order (0 = {SICK[0]}) {order}; pending readings {readings}")
    # One bucket for both rules: the i-th eviction waits for the i-th token, whichever rule it is
    # (a bucket per rule would let two go every 10 s, all twenty within about 95 s).
    early = [(i, o) for i, o in enumerate(offsets) if o < i * INTERVAL - TOLERANCE]
    assert not early, f"evictions ahead of one every {INTERVAL:.0f}s (index, offset): {early}"
    assert offsets[-1] <= (PODS - 1) * INTERVAL + 20.0, offsets
    for device in SICK:
        assert len(messages[device]) >= 10, f"the condition of {device}'s rule was seldom seen: {messages}"
        evicted = [int(m["evicted"] or 0) for m in map(PENDING.fullmatch, messages[device]) if m]
        assert max(evicted) >= PODS_PER_DEVICE // 2, f"the condition followed the evictions: {evicted}"

    # Each pod was evicted once: one Event each, never repeated.
    def all_told() -> dict[str, list[dict[str, Any]]]:
        told: dict[str, list[dict[str, Any]]] = {}
        for event in world.our_events():
            told.setdefault(event["involvedObject"]["name"], []).append(event)
        return told if set(told) >= set(device_of) else {}

    told = wait_for(all_told, 30, "an eviction Event for every pod")
    assert set(told) == set(device_of), sorted(set(told) - set(device_of))
    repeated = {
        p: [e.get("count", 1) for e in es]
        for p, es in told.items()
        if len(es) > 1 or es[0].get("count", 1) > 1
    }
    assert not repeated, f"pods evicted more than once: {repeated}"


def _eviction_condition(rule: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (rule.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == "EvictionInProgress"), None)
