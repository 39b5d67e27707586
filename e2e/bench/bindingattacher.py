"""bindingattacher: N claims with one binding-conditioned device each (bindsToNode) and the
always-ready Noop action. Latency from the claim's allocation until its binding condition is
True, p50 and p99; the time until every pod is bound; API calls per claim; peak RSS.
Ours only: upstream has no counterpart.

Both moments are taken from a watch on the claims, timed on arrival, so the measure is what
the spec's overhead target names ("allocation visible" to readiness). ``allocationTimestamp``
would be the natural start, but the API server stores it truncated to whole seconds, which
adds 0-1 s (0.5 s on average) to every sample; it is reported alongside (``*_from_stamp``) as
an upper bound. A LIST poll (the earlier method) blurred both ends by the duration of a
poll of 200 claims and 200 pods, and loaded the two-core machine it measured."""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from devcluster.constants import PLACEHOLDER_IMAGE, REPO_ROOT
from devcluster.kube import Kube, wait_for
from devcluster.nodes import node_body
from e2e import harness
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
from e2e.bench.watch import watching
from operators.core.client import KubeClient
from operators.kubectl_dra.grants import driver_grant

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


@dataclass
class Timeline:
    """When this process saw each claim allocated and ready and each pod bound (watch events).

    ``monotonic`` times are taken when the event arrives. ``stamp`` is the allocation's
    ``allocationTimestamp`` and ``ready_wall`` the wall clock at readiness, for the second,
    coarser measure (same host, same clock)."""

    allocated: dict[str, float] = field(default_factory=dict)
    allocated_wall: dict[str, float] = field(default_factory=dict)
    stamp: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)
    ready_wall: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)

    def claim(self, body: dict[str, Any], now: float, wall: float) -> None:
        name = body["metadata"]["name"]
        allocation = body.get("status", {}).get("allocation")
        if allocation and name not in self.allocated:
            self.allocated[name] = now
            self.allocated_wall[name] = wall
            stamp = allocation.get("allocationTimestamp")
            if stamp:
                self.stamp[name] = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        if _ready(body) and name not in self.ready:
            self.ready[name] = now
            self.ready_wall[name] = wall

    def pod(self, body: dict[str, Any], now: float, _wall: float) -> None:
        if body.get("spec", {}).get("nodeName"):
            # pod-0007 consumes claim-0007
            self.bound.setdefault(body["metadata"]["name"].replace("pod-", "claim-"), now)


def _requests(metrics: str) -> dict[str, float]:
    """``dra_operators_client_requests_total`` summed per HTTP method."""
    totals: dict[str, float] = {}
    for match in re.finditer(r"^dra_operators_client_requests_total\{([^}]*)\} (\S+)$", metrics, re.M):
        method = re.search(r'method="([^"]+)"', match.group(1))
        if method:
            totals[method.group(1)] = totals.get(method.group(1), 0.0) + float(match.group(2))
    return totals


TIERS = (("unthrottled", ("--kube-api-qps=0",)), ("default-qps", ()))
"""The attacher's client unthrottled, and at its shipped QPS/burst (50/100)."""


def run() -> list[Result]:
    return [_tier(name, args) for name, args in TIERS]


def _tier(tier: str, args: tuple[str, ...]) -> Result:
    result = Result("bindingattacher", tier)
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
            # The manifests grant no driver; the benchmark's is granted as a user grants theirs.
            harness.apply_rbac(cluster, driver_grant(DRIVER, harness.OPERATOR_NAMESPACE))
            with our_operator(cluster, api, "bindingattacher", args) as op:
                assert op.process is not None
                rss = PeakRss(op.process.pid)
                timeline = Timeline()
                handlers = {
                    f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims": timeline.claim,
                    f"/api/v1/namespaces/{NAMESPACE}/pods": timeline.pod,
                }
                with watching(api.kubeconfig, handlers) as watches:
                    before = _requests(op.metrics())
                    started = time.monotonic()
                    run_async(_workload, api.kubeconfig)

                    def all_bound() -> bool:
                        rss.sample()
                        watches.check()
                        return len(timeline.bound) == CLAIMS

                    wait_for(all_bound, 600, "every pod to be bound", interval=POLL)
                    finished = max(timeline.bound.values())
                    after = _requests(op.metrics())
                _report(result, timeline, started, finished)
                calls = {m: (after.get(m, 0.0) - before.get(m, 0.0)) / CLAIMS for m in after}
                result.ours["api_calls_per_claim"] = round(sum(calls.values()), 2)
                per_method = ", ".join(f"{m} {n:.2f}" for m, n in sorted(calls.items()) if n)
                result.notes.append(f"API requests per claim until all pods were bound: {per_method}")
                result.ours["peak_rss_mib"] = rss.mib
                if watches.stats.relists:
                    result.notes.append(
                        f"a watch ended and was resumed by a listing {watches.stats.relists}x"
                    )
        finally:
            api.close()
    result.notes.append(
        f"{CLAIMS} claims, one bindsToNode device each, Noop action. p50/p99: the claim's allocation "
        "seen by a watch until its readiness condition seen True by the same watch. "
        "*_from_stamp: from allocationTimestamp instead, which has 1 s resolution (truncated), "
        "so it overstates each latency by 0-1 s (0.5 s on average), and it includes the time the "
        "scheduler takes to write the allocation (stamp_to_visible, same 0-1 s bias)."
    )
    return result


def _report(result: Result, timeline: Timeline, started: float, finished: float) -> None:
    names = [n for n in timeline.ready if n in timeline.allocated]
    latencies = [timeline.ready[n] - timeline.allocated[n] for n in names]
    stamped = [timeline.ready_wall[n] - timeline.stamp[n] for n in names if n in timeline.stamp]
    # How long after its allocationTimestamp the scheduler's allocation write became visible.
    visible = [timeline.allocated_wall[n] - timeline.stamp[n] for n in names if n in timeline.stamp]
    result.ours["p50_seconds"] = round(median(latencies), 3)
    result.ours["p99_seconds"] = round(percentile(latencies, 99), 3)
    result.ours["max_seconds"] = round(max(latencies), 3)
    result.ours["p50_from_stamp_seconds"] = round(median(stamped), 3)
    result.ours["p99_from_stamp_seconds"] = round(percentile(stamped, 99), 3)
    result.ours["stamp_to_visible_p50_seconds"] = round(median(visible), 3)
    result.ours["all_bound_seconds"] = round(finished - started, 2)
    bound_after = [timeline.bound[n] - timeline.ready[n] for n in names if n in timeline.bound]
    result.ours["bound_after_ready_p99_seconds"] = round(percentile(bound_after, 99), 2)
    result.ours["bound_after_last_ready_seconds"] = round(finished - max(timeline.ready.values()), 2)
