"""devicehealth e2e: a policy's ``evictionsPerMinute`` paces the evictions of all its rules together
(docs/device-health.md, Behaviour, 6; the issue's "20 pods on tainted devices with
evictionsPerMinute: 6").

Twenty pods run on the real node, ten sharing each of two ResourceClaims, so two GPUs carry ten
pods each; a bystander's claim holds a third. The test driver marks the two GPUs unhealthy with a
``None`` taint in its slice; the policy taints both ``NoExecute``, so two rules, owned by the one
policy, share its token bucket: the 20 pods go one every 10 s, the last about 190 s after the
first, and each rule's ``EvictionInProgress`` condition reads upstream's pending text while its
pods wait. The operators are the installed product (the package's conftest).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from devcluster import realnode
from devcluster.kube import Kube, wait_for
from e2e.devicehealth.support import POLICIES, POLICY_UID_LABEL, RULES, SCRIPT, SIGNAL
from e2e.devicetaint.world import PENDING_MESSAGE as PENDING
from e2e.product.support import RESOURCE, allocated_device, eviction_condition, pod_body
from e2e.resourceclaim.support import claim_body
from e2e.support import Tracker
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

pytestmark = [pytest.mark.devcluster_only, pytest.mark.kube_proxy, pytest.mark.timeout(600)]

PER_MINUTE = 6
INTERVAL = 60.0 / PER_MINUTE
SICK = ("sick-a", "sick-b")
BYSTANDER = "bystander"
PODS_PER_CLAIM = 10
PODS = PODS_PER_CLAIM * len(SICK)
# One poll's latency on each of two observations, and the reconcile after a token is due.
TOLERANCE = 2.0
TIMEOUT = (PODS - 1) * INTERVAL + 60.0


def shared_claim_pod(name: str, claim: str) -> dict[str, Any]:
    """A pod on the real node that shares the existing ResourceClaim ``claim`` with others."""
    body = pod_body(name, "", SCRIPT)
    body["metadata"]["labels"] = {"claim": claim}
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return body


def running(api: Kube, namespace: str) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in api.list(f"/api/v1/namespaces/{namespace}/pods")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def test_a_policys_rules_share_one_bucket_and_read_upstreams_message_while_pods_wait(
    api: Kube,
    objects: Tracker,
    namespace: str,
    healthy_node: realnode.NodeLayout,
    node_gpu_class: str,
    unique_name: Callable[[str], str],
) -> None:
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    claim_of = {f"paced-{c}-{i}": c for c in SICK for i in range(PODS_PER_CLAIM)}
    for claim in (*SICK, BYSTANDER):
        body = claim_body(claim, device_class=node_gpu_class)
        api.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", body)
    for pod, claim in {**claim_of, BYSTANDER: BYSTANDER}.items():
        api.create(pods_path, shared_claim_pod(pod, claim))
    everyone = {*claim_of, BYSTANDER}
    wait_for(lambda: running(api, namespace) >= everyone, 240, "every pod to run on the real node")
    device_of_claim = {claim: allocated_device(api, namespace, claim) for claim in (*SICK, BYSTANDER)}
    assert len(set(device_of_claim.values())) == 3, device_of_claim
    sick_devices = {device_of_claim[c]: c for c in SICK}
    for device in sick_devices:
        realnode.set_device_health(healthy_node, device, "Unhealthy", SIGNAL)

    name = unique_name("paced")
    uid = objects.create(
        POLICIES,
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceHealthPolicy",
            "metadata": {"name": name},
            "spec": {
                "scope": {"driver": realnode.DRIVER_NAME},
                "signals": {"sliceTaint": {"key": SIGNAL["key"], "effects": ["None"]}, "after": "0s"},
                "action": {"effect": "NoExecute", "clearAfter": "Never"},
                "maxUnavailable": len(SICK),
                "evictionsPerMinute": PER_MINUTE,
            },
        },
    )["metadata"]["uid"]

    def both_rules() -> dict[str, str]:
        rules = api.list(RULES, labelSelector=f"{POLICY_UID_LABEL}={uid}")
        found = {sick_devices[r["spec"]["deviceSelector"]["device"]]: r["metadata"]["name"] for r in rules}
        return found if len(found) == len(SICK) else {}

    rule_of = wait_for(both_rules, 60, "the policy's two rules")
    for rule_name in rule_of.values():
        rule = api.get(f"{RULES}/{rule_name}")
        assert rule["metadata"]["annotations"][EVICTIONS_PER_MINUTE] == str(PER_MINUTE)
        assert rule["metadata"]["ownerReferences"][0]["uid"] == uid
        assert rule["spec"]["taint"]["effect"] == "NoExecute"

    # On the real node an evicted pod's container ends at once and the pod may be gone before the
    # next poll: a pod of the test's that is no longer listed was evicted too.
    evicted_at: dict[str, float] = {}
    messages: dict[str, list[str]] = {c: [] for c in SICK}
    deadline = time.monotonic() + TIMEOUT
    while len(evicted_at) < PODS and time.monotonic() < deadline:
        # The rules before the pods: a rule seen Completed while one of its pods still waits
        # would then be the operator's fault, never the order of the two reads.
        rules = {r["metadata"]["name"]: r for r in api.list(RULES, labelSelector=f"{POLICY_UID_LABEL}={uid}")}
        now = time.monotonic()
        listed = {p["metadata"]["name"]: p for p in api.list(pods_path)}
        for pod in claim_of:
            if pod not in listed or listed[pod]["metadata"].get("deletionTimestamp"):
                evicted_at.setdefault(pod, now)
        for claim, rule_name in rule_of.items():
            waiting = [p for p, c in claim_of.items() if c == claim and p not in evicted_at]
            found = eviction_condition(rules.get(rule_name))
            if not waiting or not found:
                continue
            assert (found["status"], found["reason"]) == ("True", "PodsPendingEviction"), (claim, found)
            assert PENDING.fullmatch(found["message"]), (claim, found["message"])
            messages[claim].append(found["message"])
        time.sleep(0.5)
    assert len(evicted_at) == PODS, f"only {len(evicted_at)} of {PODS} evicted in {TIMEOUT:.0f}s"
    wanted = ("False", "Completed", f"{PODS_PER_CLAIM} pods evicted since starting the controller.")
    wait_for(
        lambda: all(_reads(api, rule_name) == wanted for rule_name in rule_of.values()),
        30,
        f"both rules to read {wanted}",
    )
    assert BYSTANDER in running(api, namespace), "the bystander on a healthy GPU was evicted"

    times = sorted(evicted_at.values())
    offsets = [round(t - times[0], 1) for t in times]
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(times)]
    order = "".join(str(SICK.index(claim_of[p])) for p in sorted(evicted_at, key=lambda p: evicted_at[p]))
    readings = {c: len(m) for c, m in messages.items()}
    print(f"policy pacing: {PODS} evictions over {offsets[-1]:.1f}s, offsets {offsets}, gaps {gaps}")
    print(f"policy pacing: claims in eviction order (0 = {SICK[0]}) {order}; pending readings {readings}")
    # One bucket for both rules: the i-th eviction waits for the i-th token, whichever rule it is
    # (a bucket per rule would let two go every 10 s, all twenty within about 95 s).
    early = [(i, o) for i, o in enumerate(offsets) if o < i * INTERVAL - TOLERANCE]
    assert not early, f"evictions ahead of one every {INTERVAL:.0f}s (index, offset): {early}"
    assert offsets[-1] <= (PODS - 1) * INTERVAL + 20.0, offsets
    for claim in SICK:
        assert len(messages[claim]) >= 10, f"the condition of {claim}'s rule was seldom seen: {messages}"
        evicted = [int(m["evicted"] or 0) for m in map(PENDING.fullmatch, messages[claim]) if m]
        assert max(evicted) >= PODS_PER_CLAIM // 2, f"the condition followed the evictions: {evicted}"

    # Each pod was evicted once: one Event each, never repeated.
    def all_told() -> dict[str, list[dict[str, Any]]]:
        told: dict[str, list[dict[str, Any]]] = {}
        for event in api.list(f"/api/v1/namespaces/{namespace}/events"):
            if event.get("reason") == "DeviceTaintManagerEviction":
                told.setdefault(event["involvedObject"]["name"], []).append(event)
        return told if set(told) >= set(claim_of) else {}

    told = wait_for(all_told, 30, "an eviction Event for every pod")
    assert set(told) == set(claim_of), sorted(set(told) - set(claim_of))
    repeated = {
        p: [e.get("count", 1) for e in es]
        for p, es in told.items()
        if len(es) > 1 or es[0].get("count", 1) > 1
    }
    assert not repeated, f"pods evicted more than once: {repeated}"


def _reads(api: Kube, rule: str) -> tuple[str, str, str] | None:
    found = eviction_condition(api.get_or_none(f"{RULES}/{rule}"))
    return (found["status"], found["reason"], found["message"]) if found else None
