"""devicetaint e2e: ``--eviction-mode=evict``, eviction through the Eviction API, which honours
PodDisruptionBudgets (issue #26; upstream kubernetes/kubernetes#126189).

The pod runs on a fake node, so the test reports it Running and Ready as a kubelet would: the Eviction
API lets a Pending pod go whatever its budget says. kube-controller-manager's disruption controller
computes the budget's status, and kube-apiserver refuses or accepts each eviction: every decision here
is the real cluster's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.kube import Kube, wait_for
from e2e.devicetaint.scenarios import ONE_EVICTED
from e2e.devicetaint.world import MARKING, World, disruption_target

TIMEOUT = 60.0


def _budget(api: Kube, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = api.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
    return result


def test_a_budget_holds_the_eviction_until_it_allows_it(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    api, namespace = world.api, world.namespace
    pool = unique_name("pool")
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0"])
    pod = world.allocated_pod("guarded", driver_name, pool, ["gpu-0"], labels={"app": "guarded"})
    uid = pod["metadata"]["uid"]
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    api.patch(f"/api/v1/namespaces/{namespace}/pods/guarded/status", {"status": ready})
    budget = "keep-guarded"
    api.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": budget},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    wait_for(
        lambda: _budget(api, namespace, budget).get("status", {}).get("expectedPods") == 1,
        TIMEOUT,
        "the disruption controller to count the pod under its budget",
    )

    with operator("devicetaint", extra_args=("--eviction-mode=evict",)):
        rule = unique_name("rule")
        world.rule(rule, {"driver": driver_name, "pool": pool, "device": "gpu-0"})

        # Refused: a Warning on the pod names the budget, and the rule counts the pod as still pending.
        def refusal() -> dict[str, Any] | None:
            for event in world.our_events():
                if event["involvedObject"].get("uid") == uid and event["type"] == "Warning":
                    return event
            return None

        warning = wait_for(refusal, TIMEOUT, "a Warning Event naming the budget")
        assert warning is not None
        assert warning["message"] == (
            f"Cannot evict pod: its PodDisruptionBudget {budget} allows no disruption now "
            f"(The disruption budget {budget} needs 1 healthy pods and has 1 currently); retrying"
        )
        world.wait_rule(
            rule, "True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace.", TIMEOUT
        )
        held = world.pod_now("guarded")
        assert held is not None
        assert "deletionTimestamp" not in held["metadata"]
        assert disruption_target(held) is None, "a pod its budget keeps is not marked"
        # The refusals go on, with backoff, while the budget holds.
        wait_for(lambda: (refusal() or {}).get("count", 0) >= 2, TIMEOUT, "a second refusal")

        api.patch(
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{budget}",
            {"spec": {"minAvailable": 0}},
        )
        evicted = world.wait_terminating("guarded", TIMEOUT)
        target = disruption_target(evicted)
        assert target is not None
        assert target["reason"] == "EvictionByEvictionAPI", target
        marking = [
            e for e in world.our_events() if e["involvedObject"].get("uid") == uid and e["type"] == "Normal"
        ]
        assert [e["message"] for e in marking] == [MARKING]
        world.wait_rule(rule, "False", "Completed", ONE_EVICTED, TIMEOUT)
