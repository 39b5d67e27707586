"""devicetaint: a NoExecute DeviceTaintRule over N allocated, reserved, bound pods; seconds from
creating the rule until every pod has a deletionTimestamp (the arrival of the last such pod update
on a watch). Also our operator's peak RSS."""

from __future__ import annotations

import functools
import time

from devcluster.constants import PLACEHOLDER_IMAGE
from devcluster.kube import Kube, wait_for
from devcluster.nodes import node_body
from e2e.bench.env import PeakRss, Result, bounded_gather, compare_tiers, run_async
from e2e.bench.watch import FirstSeen, watching
from operators.core.client import KubeClient

DRIVER = "bench.devicetaint.dra-operators.test"
NAMESPACE = "bench-devicetaint"
NODES = 10
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"


async def _populate(client: KubeClient, pods: int) -> None:
    await bounded_gather(
        [
            functools.partial(client.create, "/api/v1/nodes", node_body(f"bench-node-{n}"))
            for n in range(NODES)
        ]
    )
    claims = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"

    async def one(i: int) -> None:
        node = f"bench-node-{i % NODES}"
        claim = await client.create(
            claims,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{i:05d}"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "bench"}}]}},
            },
        )
        pod = await client.create(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"pod-{i:05d}"},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {"name": "c", "image": PLACEHOLDER_IMAGE, "resources": {"claims": [{"name": "d"}]}}
                    ],
                    "resourceClaims": [{"name": "d", "resourceClaimName": f"claim-{i:05d}"}],
                },
            },
        )
        claim["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "r", "driver": DRIVER, "pool": node, "device": f"dev-{i // NODES}"}
                    ]
                }
            },
            "reservedFor": [
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            ],
        }
        await client.replace(f"{claims}/{claim['metadata']['name']}/status", claim)

    await bounded_gather([functools.partial(one, i) for i in range(pods)])


def _workload(api: Kube, pods: int, rss: PeakRss | None) -> float:
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "bench"},
        "spec": {
            "deviceSelector": {"driver": DRIVER},
            "taint": {"key": "bench", "value": "x", "effect": "NoExecute"},
        },
    }
    marked = FirstSeen(lambda pod: bool(pod["metadata"].get("deletionTimestamp")))
    with watching(api.kubeconfig, {f"/api/v1/namespaces/{NAMESPACE}/pods": marked}) as watches:
        started = time.monotonic()
        api.create(RULES, rule)
        finished = marked.wait(watches, pods, 900, f"{pods} pods to be marked for deletion")
    if rss is not None:
        rss.sample()
    return finished - started


def _setup(api: Kube, pods: int) -> None:
    api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    wait_for(
        lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"), 60, "default SA"
    )
    run_async(functools.partial(_populate, pods=pods), api.kubeconfig)


def run(pods: int = 1000) -> list[Result]:
    return compare_tiers(
        "devicetaint",
        lambda api: _setup(api, pods),
        lambda api, rss: _workload(api, pods, rss),
        f"{pods} allocated, reserved, bound pods; one NoExecute rule over their driver",
    )
