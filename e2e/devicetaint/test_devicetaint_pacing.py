"""devicetaint e2e: eviction pacing, ``dra-operators.io/evictions-per-minute`` on a DeviceTaintRule (a
project extension beyond upstream, docs/device-health.md, Behaviour, 6).

Eight pods use one device; a rule annotated with 6 per minute taints it ``NoExecute``. The operator
must spread the evictions (a token every 10 s, burst 1: the eighth about 70 s after the first), and
the rule's condition must keep upstream's words for the pods that wait.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from devcluster.kube import Kube
from e2e.devicetaint.world import PENDING_MESSAGE as PENDING
from e2e.devicetaint.world import PodPlan, World, create_bulk, metric
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

PODS = 8
PER_MINUTE = 6
BURST = 1
ANNOTATION = EVICTIONS_PER_MINUTE
TIMEOUT = 150.0


def test_a_paced_rule_spreads_its_evictions_and_reads_upstreams_message_while_pods_wait(
    api: Kube,
    world: World,
    namespace: str,
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    pool = unique_name("pool")
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0"])
    names = [f"paced-{i}" for i in range(PODS)]
    create_bulk(world, [PodPlan(name, driver_name, pool, "gpu-0") for name in names])

    with operator("devicetaint") as op:
        rule = unique_name("rule")
        selector = {"driver": driver_name, "pool": pool, "device": "gpu-0"}
        world.rule(rule, selector, annotations={ANNOTATION: str(PER_MINUTE)})
        evicted_at: dict[str, float] = {}
        waiting_conditions: list[dict[str, Any]] = []
        held_metric = 0.0
        deadline = time.monotonic() + TIMEOUT
        while len(evicted_at) < PODS and time.monotonic() < deadline:
            now = time.monotonic()
            for pod in api.list(f"/api/v1/namespaces/{namespace}/pods"):
                name = pod["metadata"]["name"]
                if pod["metadata"].get("deletionTimestamp") and name not in evicted_at:
                    evicted_at[name] = now
            condition = world.rule_condition(rule)
            if condition is not None and 0 < len(evicted_at) < PODS:
                waiting_conditions.append({**condition, "terminating": len(evicted_at)})
            if 0 < len(evicted_at) < PODS - 1:
                held_metric = max(held_metric, metric(op.metrics(), "dra_operators_devicetaint_paced_pods"))
            time.sleep(0.5)
        assert len(evicted_at) == PODS, f"only {len(evicted_at)} evicted in {TIMEOUT}s"
        world.wait_rule(
            rule, "False", "Completed", f"{PODS} pods evicted since starting the controller.", 30.0
        )

    times = sorted(evicted_at.values())
    spread = times[-1] - times[0]
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(times)]
    most_in_a_minute = max(sum(1 for t in times if start <= t < start + 60.0) for start in times)
    print(f"pacing: {PODS} evictions over {spread:.1f}s, gaps {gaps}, at most {most_in_a_minute} in 60 s")
    assert spread >= 60.0, gaps
    assert most_in_a_minute <= PER_MINUTE + BURST, gaps
    assert held_metric >= 1, "the gauge counts the pods that wait for a token"

    # While pods waited, the condition read upstream's pending message, in its exact words.
    assert waiting_conditions, "the condition was never seen while pods waited"
    evicted_so_far = []
    for condition in waiting_conditions:
        assert (condition["status"], condition["reason"]) == ("True", "PodsPendingEviction"), condition
        match = PENDING.fullmatch(condition["message"])
        assert match is not None, condition["message"]
        assert int(match["pods"]) >= 1
        evicted_so_far.append(int(match["evicted"] or 0))
    assert max(evicted_so_far) >= PODS // 2, "the condition followed the paced evictions"
