"""resourceclaim: N pods with one template claim each; seconds from the first pod create until
every pod's status records its claim (the arrival of the last such pod update on a watch).
Also our operator's peak RSS."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from devcluster.constants import PLACEHOLDER_IMAGE
from devcluster.kube import Kube, wait_for
from e2e.bench.env import (
    TIERS,
    PeakRss,
    Result,
    bounded_gather,
    compare_tiers,
    measure_ours,
    run_async,
)
from e2e.bench.watch import FirstSeen, watching
from operators.core.client import KubeClient

NAMESPACE = "bench-resourceclaim"


def _template() -> dict[str, Any]:
    # The class does not exist, so the scheduler only marks the pods unschedulable: the same
    # extra load in both runs, and nothing else competes for the controller's token bucket.
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "bench"},
        "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "bench"}}]}}},
    }


def _pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:05d}"},
        "spec": {
            "containers": [
                {"name": "c", "image": PLACEHOLDER_IMAGE, "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "bench"}],
        },
    }


def _workload(api: Kube, pods: int, rss: PeakRss | None) -> float:
    api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    wait_for(
        lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"), 60, "default SA"
    )
    api.create(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates", _template())

    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    async def create_all(client: KubeClient) -> None:
        await bounded_gather([functools.partial(client.create, pods_path, _pod(i)) for i in range(pods)])

    recorded = FirstSeen(lambda pod: bool(pod.get("status", {}).get("resourceClaimStatuses")))
    with watching(api.kubeconfig, {pods_path: recorded}) as watches:
        started = time.monotonic()
        creator = threading.Thread(target=run_async, args=(create_all, api.kubeconfig))
        creator.start()
        finished = recorded.wait(watches, pods, 900, f"{pods} pod statuses to name their claims")
        creator.join()
    if rss is not None:
        rss.sample()
    return finished - started


def run(pods: int = 1000, memory_pods: int = 5000) -> list[Result]:
    results = compare_tiers(
        "resourceclaim",
        lambda api: None,
        lambda api, rss: _workload(api, pods, rss),
        f"{pods} pods, one template claim each",
    )
    # The memory target is set for 5000 pods and their 5000 claims in the watch cache.
    memory = Result("resourceclaim", "memory")
    memory.ours.update(
        measure_ours(
            "resourceclaim",
            TIERS["unthrottled"],
            lambda api: None,
            lambda api, rss: _workload(api, memory_pods, rss),
        )
    )
    memory.notes.append(f"ours only: {memory_pods} pods, one template claim each, unthrottled")
    return [*results, memory]
