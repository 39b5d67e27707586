"""devicetaint e2e: SIGKILL in the middle of a mass eviction (spec §17, scenario 34; §14).

300 bound pods with allocated, reserved claims; 30 of them tolerate the taint forever. A NoExecute
DeviceTaintRule selects every device; the operator is SIGKILLed after about 100 deletions and
restarted. The rule starts with effect None, for the dry run at this scale (scenario 39's message).
Every non-tolerating pod must go, and no tolerating pod may get a condition, an Event or a
DELETE. The restarted process counts the pods it finds terminating as evicted, so its counter ends at
270 too (spec §14: "counted again").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.kube import wait_for
from e2e.devicetaint.world import (
    DRY_TAIL,
    RESOURCE,
    PodPlan,
    World,
    create_bulk,
    disruption_target,
    metric,
    tolerate,
)

PODS = 300
TOLERATING = 30
PER_SLICE = 100
# A faster client than the default 20 QPS keeps the test short; the kill still lands mid-way.
FAST_CLIENT = ("--kube-api-qps", "60", "--kube-api-burst", "60")
DRY_RUN = (
    f"{PODS} published devices selected. {PODS} allocated devices selected. "
    f"{PODS - TOLERATING} pods would be evicted in 1 namespace {DRY_TAIL}"
)
EVICTED = "pods evicted since starting the controller."


def test_sigkill_mid_eviction(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    api, namespace = world.api, world.namespace
    for index in range(PODS // PER_SLICE):
        devices = [f"gpu-{i}" for i in range(index * PER_SLICE, (index + 1) * PER_SLICE)]
        world.resource_slice(f"{driver_name}-{index}", driver_name, f"pool-{index}", devices)
    plans = [
        PodPlan(
            f"p-{i}",
            driver_name,
            f"pool-{i // PER_SLICE}",
            f"gpu-{i}",
            (tolerate(),) if i % (PODS // TOLERATING) == 0 else (),
        )
        for i in range(PODS)
    ]
    uids = create_bulk(world, plans)
    tolerating = {plan.name for plan in plans if plan.tolerations}
    assert len(tolerating) == TOLERATING

    def terminating() -> set[str]:
        pods = api.list(f"/api/v1/namespaces/{namespace}/pods")
        return {p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")}

    rule = unique_name("mass")
    with operator("devicetaint", extra_args=FAST_CLIENT) as op:
        # Scenario 39's dry run at this scale, then scenario 23's switch to NoExecute.
        world.rule(rule, {"driver": driver_name}, effect="None")
        world.wait_rule(rule, "False", "NoEffect", DRY_RUN, timeout=20)
        api.patch(f"{RESOURCE}/devicetaintrules/{rule}", {"spec": {"taint": {"effect": "NoExecute"}}})
        wait_for(lambda: len(terminating()) >= 100, 60, "about 100 deletions")
        op.kill()
    at_kill = len(terminating())
    assert at_kill < PODS - TOLERATING, "the kill came too late to interrupt anything"
    with operator("devicetaint", extra_args=FAST_CLIENT) as op:
        must_go = {plan.name for plan in plans} - tolerating
        wait_for(lambda: terminating() >= must_go, 90, "every non-tolerating pod to be evicted")
        # The restarted process counted the pods it found terminating, so the total is whole again.
        world.wait_rule(rule, "False", "Completed", f"{PODS - TOLERATING} {EVICTED}", timeout=30)
        text = op.metrics()
    assert metric(text, "dra_operators_devicetaint_pod_deletions_total") == PODS - TOLERATING

    pods = {p["metadata"]["name"]: p for p in api.list(f"/api/v1/namespaces/{namespace}/pods")}
    touched = {e["involvedObject"]["name"] for e in world.our_events()}
    for name in tolerating:
        pod = pods[name]
        assert pod["metadata"]["uid"] == uids[name]
        assert not pod["metadata"].get("deletionTimestamp"), name
        assert disruption_target(pod) is None, name
        assert name not in touched, name
    print(f"terminating at the kill: {at_kill}")
