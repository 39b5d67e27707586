"""poolstatus: 100 pools x 128 devices with 5000 allocated claims; latency from creating a
ResourcePoolStatusRequest (built-in v1alpha3) until its Complete condition, over 20 requests
one after another. Also our operator's peak RSS."""

from __future__ import annotations

import functools
import time
from typing import Any

from devcluster.kube import Kube, wait_for
from e2e.bench.env import (
    PeakRss,
    Result,
    bounded_gather,
    devcluster,
    median,
    our_operator,
    percentile,
    run_async,
)
from operators.core.client import KubeClient

DRIVER = "bench.poolstatus.dra-operators.test"
POOLS, DEVICES, CLAIMS, REQUESTS = 100, 128, 5000, 20
NAMESPACE = "bench-poolstatus"
REQUESTS_PATH = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"


def _slice(pool: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"bench-pool-{pool}"},
        "spec": {
            "driver": DRIVER,
            "allNodes": True,
            "pool": {"name": f"pool-{pool}", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{d}", "attributes": {"index": {"int": d}}} for d in range(DEVICES)],
        },
    }


def _claim(j: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{j:05d}"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "bench"}}]}},
    }


def _allocation(j: int) -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": "r", "driver": DRIVER, "pool": f"pool-{j % POOLS}", "device": f"dev-{j // POOLS}"}
            ]
        }
    }


async def _populate(client: KubeClient) -> None:
    await bounded_gather(
        [
            functools.partial(client.create, "/apis/resource.k8s.io/v1/resourceslices", _slice(p))
            for p in range(POOLS)
        ]
    )
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"

    async def claim(j: int) -> None:
        created = await client.create(path, _claim(j))
        created["status"] = {"allocation": _allocation(j)}
        await client.replace(f"{path}/{created['metadata']['name']}/status", created)

    await bounded_gather([functools.partial(claim, j) for j in range(CLAIMS)])


def _complete(api: Kube, name: str) -> bool:
    obj = api.get(f"{REQUESTS_PATH}/{name}")
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def _latencies(api: Kube, rss: PeakRss | None) -> list[float]:
    latencies = []
    for i in range(REQUESTS):
        name = f"bench-{i}"
        started = time.monotonic()
        api.create(
            REQUESTS_PATH,
            {
                "apiVersion": "resource.k8s.io/v1alpha3",
                "kind": "ResourcePoolStatusRequest",
                "metadata": {"name": name},
                "spec": {"driver": DRIVER},
            },
        )
        wait_for(functools.partial(_complete, api, name), 60, f"request {name} to complete", interval=0.02)
        latencies.append(time.monotonic() - started)
        if rss is not None:
            rss.sample()
        api.delete(f"{REQUESTS_PATH}/{name}")
    return latencies


def _setup(api: Kube) -> None:
    api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    wait_for(
        lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"), 60, "default SA"
    )
    run_async(_populate, api.kubeconfig)


def _summary(latencies: list[float]) -> dict[str, float]:
    return {"p50_seconds": round(median(latencies), 3), "p99_seconds": round(percentile(latencies, 99), 3)}


def run() -> list[Result]:
    result = Result("poolstatus", "unthrottled-setup")
    with devcluster(upstream=True) as cluster:
        api = Kube(cluster.kubeconfig)
        try:
            _setup(api)
            result.upstream.update(_summary(_latencies(api, None)))
        finally:
            api.close()
    with devcluster(upstream=False) as cluster:
        api = Kube(cluster.kubeconfig)
        try:
            # Started before the setup, as kube-controller-manager runs through it above (see
            # env.measure_ours).
            with our_operator(cluster, api, "poolstatus", ()) as op:
                _setup(api)
                assert op.process is not None
                rss = PeakRss(op.process.pid)
                result.ours.update(_summary(_latencies(api, rss)))
                result.ours["peak_rss_mib"] = rss.mib
        finally:
            api.close()
    result.notes.append(
        f"{POOLS} pools x {DEVICES} devices, {CLAIMS} allocated claims, {REQUESTS} requests in sequence"
    )
    return [result]
