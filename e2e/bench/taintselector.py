"""taintselector: one DeviceTaintSelector whose CEL expression selects all of 1000 devices published in
50 ResourceSlices; seconds from creating the selector until its 1000 DeviceTaintRules exist. Ours only:
upstream has no counterpart since Kubernetes 1.35 removed selectors from DeviceTaintRule. Also our
operator's peak RSS."""

from __future__ import annotations

import functools
import time

from devcluster.kube import Kube
from devcluster.nodes import make_devices, node_body, slice_body
from e2e.bench.env import (
    TIERS,
    PeakRss,
    Result,
    bounded_gather,
    devcluster,
    our_operator,
    run_async,
)
from e2e.bench.watch import FirstSeen, watching
from e2e.taintselector.support import CRD_NAME, CRD_PATH, RULES, SELECTORS, UID_LABEL
from operators.core.client import KubeClient

DRIVER = "bench.taintselector.dra-operators.test"
NODES = 10
SLICES = 50
DEVICES_PER_SLICE = 20


async def _populate(client: KubeClient) -> None:
    await bounded_gather(
        [
            functools.partial(client.create, "/api/v1/nodes", node_body(f"bench-node-{n}"))
            for n in range(NODES)
        ]
    )
    slices = []
    for i in range(SLICES):
        devices = make_devices(DEVICES_PER_SLICE, prefix=f"gpu-{i}")
        for j, device in enumerate(devices):
            device["attributes"]["uuid"] = {"string": f"GPU-{i:02d}{j:02d}"}
        body = slice_body(f"bench-node-{i % NODES}", DRIVER, devices, pool=f"pool-{i}", name=f"bench-{i}")
        slices.append(functools.partial(client.create, "/apis/resource.k8s.io/v1/resourceslices", body))
    await bounded_gather(slices)


def _workload(api: Kube, rss: PeakRss) -> float:
    expected = SLICES * DEVICES_PER_SLICE
    selector = {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": {"name": "bench"},
        "spec": {
            "taint": {"key": "bench", "value": "x", "effect": "NoSchedule"},
            "deviceSelector": {
                "driver": DRIVER,
                "selectors": [
                    {"cel": {"expression": f'device.attributes["{DRIVER}"].uuid.startsWith("GPU-")'}}
                ],
            },
        },
    }
    # The cluster is fresh and holds this one selector, so every labelled rule is one of its.
    made = FirstSeen(lambda rule: UID_LABEL in (rule["metadata"].get("labels") or {}))
    with watching(api.kubeconfig, {RULES: made}) as watches:
        started = time.monotonic()
        api.create(SELECTORS, selector)
        finished = made.wait(watches, expected, 600, f"{expected} DeviceTaintRules to exist")
    rss.sample()
    return finished - started


def run() -> list[Result]:
    results = []
    for tier in TIERS.values():
        result = Result("taintselector", tier.name)
        with devcluster(upstream=False) as cluster:
            cluster.kubectl("apply", "--server-side", "--field-manager=bench", "-f", str(CRD_PATH))
            cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=30s")
            api = Kube(cluster.kubeconfig)
            try:
                run_async(_populate, api.kubeconfig)
                with our_operator(cluster, api, "taintselector", tier.operator_args) as op:
                    assert op.process is not None
                    rss = PeakRss(op.process.pid)
                    result.ours["seconds"] = round(_workload(api, rss), 2)
                    result.ours["peak_rss_mib"] = rss.mib
            finally:
                api.close()
        result.notes.append(
            f"{SLICES * DEVICES_PER_SLICE} devices in {SLICES} slices; one CEL selector selecting all; "
            "seconds to all rules; target <= 5 s (unthrottled)"
        )
        results.append(result)
    return results
