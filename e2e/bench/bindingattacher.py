"""bindingattacher: N claims with one binding-conditioned device each (bindsToNode) and the
always-ready Noop action. Latency from the claim's allocation (first seen) until its binding
conditions are True (first seen), p50 and p99; the time until every pod is bound; peak RSS.
Ours only: upstream has no counterpart."""

from __future__ import annotations

import functools
import time
from typing import Any

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
from e2e.cluster.constants import PLACEHOLDER_IMAGE, REPO_ROOT
from e2e.cluster.nodes import node_body
from e2e.kube import Kube, wait_for
from operators.core.client import KubeClient

# The shipped RBAC lets the attacher write the status of this driver (manifests/bindingattacher).
DRIVER = "gpu.fabric.example.com"
CONDITION = f"{DRIVER}/attached"
NAMESPACE = "bench-bindingattacher"
NODES = 4
CLAIMS = 200
POLL = 0.05


SLICES = 2  # a slice holds at most 128 devices


def _slice(index: int) -> dict[str, Any]:
    per_slice = CLAIMS // SLICES
    devices = [
        {
            "name": f"gpu-{i}",
            "bindsToNode": True,
            "bindingConditions": [CONDITION],
            "bindingFailureConditions": [f"{DRIVER}/attach-failed"],
        }
        for i in range(index * per_slice, (index + 1) * per_slice)
    ]
    selector = {"key": "bench.dra-operators.test/fabric", "operator": "In", "values": ["true"]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"bench-fabric-{index}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": SLICES},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [selector]}]},
            "devices": devices,
        },
    }


async def _fabric(client: KubeClient) -> None:
    for n in range(NODES):
        await client.create(
            "/api/v1/nodes", node_body(f"fabric-{n}", labels={"bench.dra-operators.test/fabric": "true"})
        )
    for index in range(SLICES):
        await client.create("/apis/resource.k8s.io/v1/resourceslices", _slice(index))
    await client.create(
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "bench-fabric"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    await client.create(
        "/apis/dra-operators.io/v1alpha1/deviceattachpolicies",
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceAttachPolicy",
            "metadata": {"name": "bench"},
            "spec": {"driver": DRIVER, "action": {"kind": "Noop"}},
        },
    )


async def _workload(client: KubeClient) -> None:
    claims = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"

    async def one(i: int) -> None:
        await client.create(
            claims,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{i:04d}"},
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "bench-fabric"}}]}
                },
            },
        )
        await client.create(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"pod-{i:04d}"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": PLACEHOLDER_IMAGE, "resources": {"claims": [{"name": "g"}]}}
                    ],
                    "resourceClaims": [{"name": "g", "resourceClaimName": f"claim-{i:04d}"}],
                },
            },
        )

    await bounded_gather([functools.partial(one, i) for i in range(CLAIMS)])


def _ready(claim: dict[str, Any]) -> bool:
    devices = claim.get("status", {}).get("devices", [])
    return any(
        c.get("type") == CONDITION and c.get("status") == "True"
        for d in devices
        for c in d.get("conditions", [])
    )


def run() -> list[Result]:
    result = Result("bindingattacher", "unthrottled")
    with devcluster(upstream=False, binding_timeout="60s") as cluster:
        api = Kube(cluster.kubeconfig)
        try:
            cluster.kubectl("apply", "--server-side", "-k", str(REPO_ROOT / "crds"))
            wait_for(lambda: api.get_or_none("/apis/dra-operators.io/v1alpha1"), 30, "the CRDs")
            api.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            wait_for(
                lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"), 60, "SA"
            )
            run_async(_fabric, api.kubeconfig)
            with our_operator(cluster, api, "bindingattacher", ("--kube-api-qps=0",)) as op:
                assert op.process is not None
                rss = PeakRss(op.process.pid)
                allocated: dict[str, float] = {}
                ready: dict[str, float] = {}
                started = time.monotonic()
                run_async(_workload, api.kubeconfig)

                def all_bound() -> bool:
                    now = time.monotonic()
                    rss.sample()
                    for claim in api.list(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"):
                        name = claim["metadata"]["name"]
                        if claim.get("status", {}).get("allocation"):
                            allocated.setdefault(name, now)
                        if _ready(claim):
                            ready.setdefault(name, now)
                    pods = api.list(f"/api/v1/namespaces/{NAMESPACE}/pods")
                    return len(pods) == CLAIMS and all(p["spec"].get("nodeName") for p in pods)

                wait_for(all_bound, 600, "every pod to be bound", interval=POLL)
                latencies = [ready[n] - allocated[n] for n in ready if n in allocated]
                result.ours["p50_seconds"] = round(median(latencies), 3)
                result.ours["p99_seconds"] = round(percentile(latencies, 99), 3)
                result.ours["all_bound_seconds"] = round(time.monotonic() - started, 2)
                result.ours["bound_after_last_ready_seconds"] = round(
                    time.monotonic() - max(ready.values()), 2
                )
                result.ours["peak_rss_mib"] = rss.mib
        finally:
            api.close()
    result.notes.append(
        f"{CLAIMS} claims, one bindsToNode device each, Noop action; times observed by polling every {POLL}s"
    )
    return [result]
