"""Our operator against the in-tree resourcepoolstatusrequest-controller (spec section 19).

The same devices, slices and claims are built in two clusters: the default one, where our
operator answers (under its own ServiceAccount), and the upstream-mode one, where
kube-controller-manager's own controller answers. Claims are allocated by each cluster's
real scheduler. For every vector the spec marks ``[upstream]`` the statuses must be equal
apart from ``lastTransitionTime``; for decision D2 (vector 41, C2) they must differ exactly
as the spec predicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e import harness
from e2e.poolstatus.support import (
    BUILTIN,
    PROJECT,
    SLICES,
    allocate,
    claim_body,
    fixture_g,
    install_crd,
    nic_slice,
    plain_devices,
    slice_body,
    tracked_requests,
    wait_done,
    without_times,
)
from e2e.support import Tracker, device_class_body

pytestmark = [pytest.mark.differential, pytest.mark.timeout(240)]

DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


@dataclass(frozen=True)
class World:
    node: str
    plain: str
    gpu: str
    nic: str


def build(api: Kube, objects: Tracker, namespace: str, world: World) -> None:
    """Devices of three drivers on one node, and one pod whose claims take a plain device,
    one Half partition and 4Gi of a NIC's bandwidth."""
    objects.node(world.node)
    devices = plain_devices(4)
    devices[3]["taints"] = [{"key": "example.com/bad", "effect": "NoSchedule"}]
    objects.create(
        SLICES, slice_body(f"{world.node}-plain-1", world.plain, "pool-1", devices, node=world.node)
    )
    objects.create(
        SLICES, slice_body(f"{world.node}-plain-2", world.plain, "pool-2", plain_devices(2), node=world.node)
    )
    for body in fixture_g(world.gpu, world.node, f"{world.node}-g"):
        objects.create(SLICES, body)
    objects.create(SLICES, nic_slice(world.nic, world.node, f"{world.node}-nics", devices=1))
    classes = {}
    for driver in (world.plain, world.gpu, world.nic):
        classes[driver] = f"{world.node}-{driver.split('-')[0]}"
        objects.create(DEVICE_CLASSES, device_class_body(classes[driver], driver))
    allocate(
        api,
        namespace,
        world.node,
        [
            claim_body("plain", classes[world.plain]),
            claim_body("half", classes[world.gpu], cel=f'device.attributes["{world.gpu}"].profile == "Half"'),
            claim_body("nic", classes[world.nic], capacity="4Gi"),
        ],
    )


def test_statuses_match_the_in_tree_controller(
    cluster: harness.Cluster,
    api: Kube,
    upstream_api: Kube,
    objects: Tracker,
    upstream_objects: Tracker,
    namespace: str,
    upstream_namespace: str,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
) -> None:
    """Vectors 2, 4b, 6, 7, 14, 26 and 64b: identical statuses; vector 41 (C2): upstream reports
    PartitionTypeMissing for a request default on a plain pool, we report nothing."""
    install_crd(cluster)
    world = World(unique_name("node"), f"plain-{driver_name}", f"gpu-{driver_name}", f"nic-{driver_name}")
    build(upstream_api, upstream_objects, upstream_namespace, world)
    build(api, objects, namespace, world)

    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "plain": (world.plain, {}),
        "limit": (world.plain, {"limit": 1}),
        "pool": (world.plain, {"poolName": "pool-2"}),
        "gpu": (world.gpu, {}),
        "nic": (world.nic, {}),
        "absent": ("absent.example.com", {}),
        # Vector 41 (CHANGED D2): compared separately below.
        "default": (
            world.plain,
            {"defaultPartitionTypeAttribute": f"{world.plain}/profile", "poolName": "pool-2"},
        ),
    }
    names = {case: unique_name(case) for case in cases}
    ours: dict[str, dict[str, Any]] = {}
    theirs: dict[str, dict[str, Any]] = {}
    with (
        tracked_requests(upstream_api) as upstream_requests,
        tracked_requests(api) as requests,
        operator("poolstatus"),
    ):
        for case, (driver, spec) in cases.items():
            upstream_requests.create(BUILTIN, names[case], driver, **spec)
            requests.create(BUILTIN, names[case], driver, **spec)
            requests.create(PROJECT, names[case], driver, **spec)
        for case in cases:
            theirs[case] = without_times(wait_done(upstream_api, BUILTIN, names[case])["status"])
            ours[case] = without_times(wait_done(api, BUILTIN, names[case])["status"])
            assert without_times(wait_done(api, PROJECT, names[case])["status"]) == ours[case], case

    for case in cases:
        if case != "default":
            assert ours[case] == theirs[case], case

    # The cases exercise what they claim to.
    plain = ours["plain"]["pools"]
    assert [(p["allocatedDevices"], p["unavailableDevices"], p["availableDevices"]) for p in plain] == [
        (1, 1, 2),
        (0, 0, 2),
    ]
    assert (ours["limit"]["poolCount"], len(ours["limit"]["pools"])) == (2, 1)
    gpu = ours["gpu"]["pools"][0]
    assert [(e["type"], e["total"], e["allocatable"]) for e in gpu["partitionSummary"]] == [
        ("Full", 1, 0),
        ("Half", 2, 1),
    ]
    assert ours["nic"]["pools"][0]["shareableSummary"] == {
        "fullyAvailableDevices": 0,
        "partiallyAvailableDevices": 1,
        "capacity": [{"name": "bandwidth", "total": "10Gi", "consumed": "4Gi", "available": "6Gi"}],
    }

    upstream_pool, our_pool = theirs["default"]["pools"][0], ours["default"]["pools"][0]
    assert upstream_pool.get("validationError") == (
        f"PartitionTypeMissing: pool {world.plain}/pool-2 declares partitionTypeAttribute "
        "but publishes no sharedCounters"
    )
    assert "validationError" not in our_pool
    assert {k: v for k, v in upstream_pool.items() if k != "validationError"} == our_pool
