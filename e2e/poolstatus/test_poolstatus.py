"""The pool-status operator against a real 1.37 control plane (spec poolstatus.md).

The in-tree resourcepoolstatusrequest-controller is off in this cluster and the operator runs
under its own ServiceAccount (manifests/poolstatus), so every status below was written by it
with exactly the shipped RBAC. Both surfaces are exercised: the built-in
``resource.k8s.io/v1alpha3`` type and the project CRD ``dra-operators.io/v1alpha1``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import yaml

from devcluster.kube import Kube, WaitTimeout, wait_for
from e2e import harness
from e2e.poolstatus.support import (
    BUILTIN,
    PROJECT,
    SLICES,
    SURFACES,
    RequestTracker,
    allocate,
    claim_body,
    complete,
    condition,
    done,
    fixture_g,
    metric,
    nic_slice,
    partition_device,
    partitioned_pool,
    plain_devices,
    results,
    slice_body,
    wait_done,
    without_times,
)
from e2e.support import Tracker, device_class_body

pytestmark = pytest.mark.timeout(180)

DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
M = "dra_operators_poolstatus_"


def _kubectl_yaml(cluster: harness.Cluster, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(cluster.kubectl("get", *args, "-o", "yaml").stdout)
    return doc


def test_seed_flow_on_both_surfaces(
    cluster: harness.Cluster,
    api: Kube,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
    requests: RequestTracker,
) -> None:
    """Seed section 2, steps 1-4, on both surfaces at once (vectors 1, 7, 85, 87, 91; C5)."""
    objects.create(SLICES, slice_body(unique_name("s"), driver_name, "pool-1", plain_devices(4)))
    name = unique_name("check-gpus")
    unknown = unique_name("unknown-driver")
    with operator("poolstatus") as op:
        # 1. Create (same name on both surfaces: two independent requests).
        for surface in SURFACES:
            requests.create(surface, name, driver_name)
        requests.create(PROJECT, unknown, "absent.example.com")
        # 2. Wait, exactly as the seed says. The plain resource name resolves to the built-in
        # group (C5); the CRD is reached by its qualified name or its short name.
        for target in (
            f"resourcepoolstatusrequest/{name}",
            f"{PROJECT.kubectl_resource}/{name}",
            f"rpsr/{unknown}",
        ):
            cluster.kubectl("wait", "--for=condition=Complete", target, "--timeout=30s", timeout=40)
        # 3. Read.
        builtin = _kubectl_yaml(cluster, f"resourcepoolstatusrequest/{name}")
        project = _kubectl_yaml(cluster, f"rpsr/{name}")
        assert builtin["apiVersion"] == BUILTIN.api_version
        assert project["apiVersion"] == PROJECT.api_version
        expected = {
            "poolCount": 1,
            "pools": [
                {
                    "driver": driver_name,
                    "poolName": "pool-1",
                    "generation": 1,
                    "resourceSliceCount": 1,
                    "totalDevices": 4,
                    "allocatedDevices": 0,
                    "availableDevices": 4,
                    "unavailableDevices": 0,
                }
            ],
            "conditions": [complete(1)],
        }
        assert without_times(builtin["status"]) == expected
        assert without_times(project["status"]) == expected
        written = condition(project)["lastTransitionTime"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written)
        assert "observedGeneration" not in condition(project)
        for obj in (builtin, project):
            # Event-level watching only: nothing of kopf's lands on a request (section 4.4).
            assert not obj["metadata"].get("annotations")
            assert not obj["metadata"].get("finalizers")
            assert not obj["metadata"].get("labels")

        # Bad input: an unknown driver gives 0 pools and still completes (vector 7).
        absent = done(api, PROJECT, unknown)
        assert absent is not None
        assert without_times(absent["status"]) == {
            "poolCount": 0,
            "conditions": [complete(0)],
        }

        # Printer columns of the CRD (vector 85).
        table = cluster.kubectl("get", "rpsr", name).stdout.splitlines()
        assert table[0].split() == ["NAME", "DRIVER", "POOLS", "STATUS", "AGE"]
        assert table[1].split()[:4] == [name, driver_name, "1", "Complete"]
        wide = cluster.kubectl("get", "rpsr", name, "-o", "wide").stdout.splitlines()
        assert wide[0].split() == ["NAME", "DRIVER", "POOLS", "STATUS", "AGE", "POOL"]

        # Metrics (vector 91), per surface.
        text = op.metrics()
        assert metric(text, f"{M}requests_processed_total", group=PROJECT.group, result="complete") == 2
        assert metric(text, f"{M}requests_processed_total", group=BUILTIN.group, result="complete") == 1
        assert metric(text, f"{M}pools_counted_count", group=BUILTIN.group) == 1
        assert metric(text, f"{M}pools_counted_sum", group=BUILTIN.group) == 1
        assert metric(text, f"{M}pools_counted_bucket", group=BUILTIN.group, le="0.0") == 0
        assert metric(text, f"{M}pools_counted_bucket", group=BUILTIN.group, le="1.0") == 1
        for surface in SURFACES:
            assert metric(text, f"{M}pending_requests", group=surface.group) == 0
            assert metric(text, f"{M}api_surface_enabled", group=surface.group) == 1
            assert metric(text, f"{M}requests_processed_total", group=surface.group, result="failed") == 0
        assert metric(text, f"{M}cache_synced", resource="resourceslices") == 1
        assert metric(text, "dra_operators_workqueue_adds_total", name="poolstatus") >= 3

        # 4. Delete one; the other is independent (vector 87).
        cluster.kubectl("delete", f"resourcepoolstatusrequest/{name}")
        wait_for(lambda: api.get_or_none(BUILTIN.path(name)) is None, 10, "the built-in request to go")
        still = api.get(PROJECT.path(name))
        assert still["status"] == project["status"]
        cluster.kubectl("delete", f"rpsr/{name}")


def _expected_nics(claims: list[dict[str, Any]], devices: int) -> dict[str, Any]:
    """The shareable summary the allocation the scheduler chose must produce (D5)."""
    consumed: dict[str, int] = {}
    for result in results(claims):
        amount = int(result["consumedCapacity"]["bandwidth"].removesuffix("Gi"))
        consumed[result["device"]] = consumed.get(result["device"], 0) + amount
    total = sum(consumed.values())
    return {
        "fullyAvailableDevices": devices - len(consumed),
        # A device whose whole bandwidth is used is neither fully nor partially available.
        "partiallyAvailableDevices": sum(1 for used in consumed.values() if used < 10),
        "capacity": [
            {
                "name": "bandwidth",
                "total": f"{10 * devices}Gi",
                "consumed": f"{total}Gi" if total else "0",
                "available": f"{10 * devices - total}Gi" if 10 * devices > total else "0",
            }
        ],
    }


def test_partitionable_gpu_and_shareable_nic(
    api: Kube,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
    namespace: str,
    requests: RequestTracker,
) -> None:
    """Fixture G with one Half allocated by the real scheduler (vector 26, the spec's own example),
    and a shareable NIC pool whose capacity two claims consume (vectors 60-65)."""
    gpu, nic = driver_name, f"nic-{driver_name}"
    node = unique_name("node")
    objects.node(node)
    for body in fixture_g(gpu, node, unique_name("g")):
        objects.create(SLICES, body)
    objects.create(SLICES, nic_slice(nic, node, unique_name("nics"), devices=2))
    gpu_class, nic_class = unique_name("gpu"), unique_name("nic")
    objects.create(DEVICE_CLASSES, device_class_body(gpu_class, gpu))
    objects.create(DEVICE_CLASSES, device_class_body(nic_class, nic))
    with operator("poolstatus"):
        # The allocation happens while the operator watches: its caches follow the claims.
        claims = allocate(
            api,
            namespace,
            node,
            [
                claim_body("half", gpu_class, cel=f'device.attributes["{gpu}"].profile == "Half"'),
                claim_body("nic-a", nic_class, capacity="4Gi"),
                claim_body("nic-b", nic_class, capacity="6Gi"),
            ],
        )
        assert results(claims)[0]["device"] in {"half-0", "half-1"}
        gpu_request, nic_request, one_pool = unique_name("gpus"), unique_name("nics"), unique_name("pool")
        for surface in SURFACES:
            requests.create(surface, gpu_request, gpu)
            requests.create(surface, nic_request, nic)
        requests.create(PROJECT, one_pool, gpu, poolName="pool-1", limit=1)
        statuses = {s: wait_done(api, s, gpu_request)["status"] for s in SURFACES}
        nic_statuses = {s: wait_done(api, s, nic_request)["status"] for s in SURFACES}

    attribute = f"{gpu}/profile"
    gpu_pool = {
        "driver": gpu,
        "poolName": "pool-1",
        "generation": 1,
        "resourceSliceCount": 2,
        "totalDevices": 3,
        "allocatedDevices": 1,
        "availableDevices": 2,
        "unavailableDevices": 0,
        "nodeName": node,
        "partitionSummary": [
            {"attribute": attribute, "type": "Full", "total": 1, "allocatable": 0},
            {"attribute": attribute, "type": "Half", "total": 2, "allocatable": 1},
        ],
    }
    for status in statuses.values():
        assert status["pools"] == [gpu_pool]
        assert status["poolCount"] == 1
    assert without_times(statuses[BUILTIN]) == without_times(statuses[PROJECT])
    filtered = wait_done(api, PROJECT, one_pool)["status"]
    assert filtered["pools"] == [gpu_pool]

    in_use = {r["device"] for r in results(claims[1:])}
    nic_pool = {
        "driver": nic,
        "poolName": "nics",
        "generation": 1,
        "resourceSliceCount": 1,
        "totalDevices": 2,
        "allocatedDevices": len(in_use),
        "availableDevices": 2 - len(in_use),
        "unavailableDevices": 0,
        "nodeName": node,
        "shareableSummary": _expected_nics(claims[1:], 2),
    }
    for status in nic_statuses.values():
        assert status["pools"] == [nic_pool]
    assert without_times(nic_statuses[BUILTIN]) == without_times(nic_statuses[PROJECT])


def test_taints_limit_incomplete_pools_and_generation_zero(
    cluster: harness.Cluster,
    api: Kube,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
    requests: RequestTracker,
) -> None:
    """Tainted devices (vectors 14, 15a), limit truncation (vectors 6, 73), an incomplete pool
    that completes with PoolIncomplete after the 20 s grace period within the seed's 30 s
    `kubectl wait` (vectors 9, 74), a pool completed during the wait (vector 72) and a pool at
    generation 0 (vector 79, C1), all in one operator run so the waits overlap."""
    tainted, limited, late, gen0 = (f"{p}-{driver_name}" for p in ("t", "lim", "late", "gen0"))
    devices = plain_devices(5)
    devices[0]["taints"] = [{"key": "example.com/bad", "effect": "NoSchedule"}]
    devices[1]["taints"] = [{"key": "example.com/bad", "effect": "NoExecute"}]
    devices[2]["taints"] = [{"key": "example.com/bad", "effect": "None"}]
    objects.create(SLICES, slice_body(unique_name("t"), tainted, "pool-1", devices))
    objects.create(
        RULES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": unique_name("rule")},
            "spec": {
                "deviceSelector": {"driver": tainted, "pool": "pool-1", "device": "device-3"},
                "taint": {"key": "example.com/rule", "effect": "NoSchedule"},
            },
        },
    )
    for pool in ("p-a", "p-b"):
        objects.create(SLICES, slice_body(unique_name(pool), limited, pool, plain_devices(2)))
    objects.create(SLICES, slice_body(unique_name("p-c"), limited, "p-c", plain_devices(2), count=2))
    objects.create(SLICES, slice_body(unique_name("late"), late, "pool-1", plain_devices(2), count=2))
    objects.create(SLICES, slice_body(unique_name("g0"), gen0, "pool-1", plain_devices(1), generation=0))

    with operator("poolstatus") as op:
        names = {key: unique_name(key) for key in ("taint", "limit", "all", "late", "gen0")}
        created = time.time()
        requests.create(PROJECT, names["all"], limited)
        requests.create(PROJECT, names["late"], late)
        requests.create(PROJECT, names["limit"], limited, limit=2)
        for surface in SURFACES:
            requests.create(surface, names["taint"], tainted)
            requests.create(surface, names["gen0"], gen0)

        for surface in SURFACES:
            pools = wait_done(api, surface, names["taint"])["status"]["pools"]
            assert [
                (p["totalDevices"], p["allocatedDevices"], p["unavailableDevices"], p["availableDevices"])
                for p in pools
            ] == [(5, 0, 3, 2)]

        # A complete pool is not held up by an incomplete one beyond the limit (vector 73).
        limit = wait_done(api, PROJECT, names["limit"], timeout=10)
        assert limit["status"]["poolCount"] == 3
        assert [p["poolName"] for p in limit["status"]["pools"]] == ["p-a", "p-b"]
        assert condition(limit)["message"] == "Calculated status for 2 pools"

        # Generation 0: the CRD takes it; the built-in type rejects it, so a Failed status.
        gen0_project = wait_done(api, PROJECT, names["gen0"])
        assert gen0_project["status"]["pools"][0]["generation"] == 0
        gen0_builtin = wait_done(api, BUILTIN, names["gen0"])
        assert gen0_builtin["status"]["poolCount"] == 0
        assert "pools" not in gen0_builtin["status"]
        failed = condition(gen0_builtin)
        assert (failed["type"], failed["status"], failed["reason"]) == ("Failed", "True", "CalculationFailed")
        assert failed["message"].startswith("Failed to write status: ")
        assert "status.pools[0].generation: Required value" in failed["message"]

        # Incomplete pools hold the request back; a slice arriving completes it at once.
        with pytest.raises(WaitTimeout):
            wait_for(lambda: done(api, PROJECT, names["late"]), 2, "no status while pool-1 is incomplete")
        objects.create(
            SLICES, slice_body(unique_name("late-2"), late, "pool-1", plain_devices(2, "more"), count=2)
        )
        arrived = time.monotonic()
        completed = wait_done(api, PROJECT, names["late"], timeout=5)
        assert time.monotonic() - arrived < 3
        assert completed["status"]["pools"][0]["totalDevices"] == 4
        assert "validationError" not in completed["status"]["pools"][0]

        # The seed's own command returns even though p-c never completes (vector 74).
        assert done(api, PROJECT, names["all"]) is None
        cluster.kubectl(
            "wait", "--for=condition=Complete", f"rpsr/{names['all']}", "--timeout=30s", timeout=40
        )
        observed = time.time()
        everything = api.get(PROJECT.path(names["all"]))
        written = _timestamp(condition(everything)["lastTransitionTime"])
        assert written >= int(created) + 20  # whole-second timestamps
        assert observed - created <= 24
        assert everything["status"]["poolCount"] == 3
        assert everything["status"]["pools"][2] == {
            "driver": limited,
            "poolName": "p-c",
            "generation": 1,
            "validationError": f"PoolIncomplete: pool {limited}/p-c is incomplete: "
            "observed 1/2 slices at generation 1",
        }
        assert condition(everything)["message"] == "Calculated status for 3 pools (1 incomplete)"

        text = op.metrics()
        incomplete = metric(
            text, f"{M}pool_validation_errors_total", group=PROJECT.group, prefix="PoolIncomplete:"
        )
        assert incomplete == 1
        assert metric(text, f"{M}grace_requeues_total", group=PROJECT.group) >= 1
        assert metric(text, f"{M}status_rejected_total", group=BUILTIN.group, reason="invalid") == 1
        assert metric(text, f"{M}requests_processed_total", group=BUILTIN.group, result="failed") == 1


def test_ttl_cleanup_and_size_guard(
    api: Kube,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
    requests: RequestTracker,
) -> None:
    """TTL deletion with small TTLs (vectors 16a-d) and the status size guard (vector 80)."""
    many, waiting = f"many-{driver_name}", f"wait-{driver_name}"
    for i in range(20):
        objects.create(SLICES, slice_body(unique_name(f"m{i}"), many, f"pool-{i:02}", plain_devices(1)))
    objects.create(SLICES, slice_body(unique_name("w"), waiting, "pool-1", plain_devices(1), count=2))
    args = (
        "--cleanup-interval=1s",
        "--completed-ttl=2s",
        "--pending-ttl=5s",
        "--incomplete-grace-period=1h",
        "--max-status-bytes=1000",
    )
    with operator("poolstatus", extra_args=args) as op:
        done_name, pending_name, large_name = (
            unique_name("done"),
            unique_name("pending"),
            unique_name("large"),
        )
        for surface in SURFACES:
            requests.create(surface, done_name, "absent.example.com")
        pending = requests.create(PROJECT, pending_name, waiting)
        requests.create(PROJECT, large_name, many)

        answered = {s: wait_done(api, s, done_name, timeout=10) for s in SURFACES}
        large = wait_done(api, PROJECT, large_name, timeout=10)
        message = condition(large)["message"]
        match = re.fullmatch(
            r"Failed to write status: status is (\d+) bytes, above the limit of 1000 bytes; "
            r"lower spec.limit or set spec.poolName",
            message,
        )
        assert match, message
        assert int(match.group(1)) > 1000
        assert large["status"]["poolCount"] == 0
        assert "pools" not in large["status"]

        for surface, obj in answered.items():
            written = _timestamp(condition(obj)["lastTransitionTime"])
            path = surface.path(done_name)
            wait_for(lambda: api.get_or_none(path) is None, 15, f"the TTL deletion of {path}")  # noqa: B023
            # Deleted strictly after the 2 s TTL (whole seconds), within a sweep or two of it.
            assert 2 < time.time() - written < 8

        assert done(api, PROJECT, pending_name) is None  # held back by the 1 h grace period
        wait_for(lambda: api.get_or_none(PROJECT.path(pending_name)) is None, 15, "the pending TTL deletion")
        assert time.time() - _timestamp(pending["metadata"]["creationTimestamp"]) > 5

        text = op.metrics()
        assert metric(text, f"{M}status_rejected_total", group=PROJECT.group, reason="too_large") == 1
        assert metric(text, f"{M}ttl_deletions_total", group=PROJECT.group, state="pending") == 1
        assert metric(text, f"{M}ttl_deletions_total", group=BUILTIN.group, state="completed") == 1
        assert metric(text, f"{M}ttl_deletion_errors_total", group=PROJECT.group) == 0
        assert metric(text, f"{M}cleanup_duration_seconds_count") >= 3


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def test_builtin_api_off_leaves_the_builtin_surface_alone(
    api: Kube,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    requests: RequestTracker,
) -> None:
    """``--builtin-api=off`` (section 2.3: for clusters whose in-tree controller answers the
    built-in type): only the CRD is served; built-in requests are neither answered nor deleted."""
    name = unique_name("off")
    with operator("poolstatus", extra_args=("--builtin-api=off", "--cleanup-interval=1s")) as op:
        for surface in SURFACES:
            requests.create(surface, name, "absent.example.com")
        wait_done(api, PROJECT, name)
        with pytest.raises(WaitTimeout):
            wait_for(lambda: done(api, BUILTIN, name), 3, "no status on the built-in surface")
        text = op.metrics()
        assert metric(text, f"{M}api_surface_enabled", group=BUILTIN.group) == 0
        assert metric(text, f"{M}api_surface_enabled", group=PROJECT.group) == 1
        assert metric(text, f"{M}pending_requests", group=BUILTIN.group) == 0  # not known: not served
    assert api.get(BUILTIN.path(name))["spec"]["driver"] == "absent.example.com"


def test_counters_too_far_apart_make_the_pool_an_error_and_block_nothing(
    api: Kube,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
    requests: RequestTracker,
) -> None:
    """A driver may publish any quantity the API server parses: a shared counter of
    ``1e2147483647`` that devices consume ``1`` of is accepted. Computing what remains exactly
    would expand a power of ten of two billion digits (Go's does, for hours), so the pool gets a
    validationError and the operator, one event loop, goes on answering other requests."""
    far, plain = f"far-{driver_name}", f"plain-{driver_name}"
    node = unique_name("node")
    objects.node(node)
    half = [partition_device("half-0", "Half", "1"), partition_device("half-1", "Half", "1")]
    counters, devices = partitioned_pool(far, node, unique_name("g"), "1e2147483647", half)
    for body in (counters, devices):
        objects.create(SLICES, body)
    published = api.get(f"{SLICES}/{counters['metadata']['name']}")
    assert published["spec"]["sharedCounters"][0]["counters"]["memory"]["value"] == "10e2147483646"
    objects.create(SLICES, slice_body(unique_name("plain"), plain, "pool-1", plain_devices(2)))

    with operator("poolstatus") as op:
        far_request, plain_request = unique_name("far"), unique_name("plain")
        for surface in SURFACES:
            requests.create(surface, far_request, far)
        requests.create(PROJECT, plain_request, plain)
        statuses = {s: wait_done(api, s, far_request)["status"] for s in SURFACES}
        assert wait_done(api, PROJECT, plain_request)["status"]["pools"][0]["totalDevices"] == 2
        errors = metric(
            op.metrics(),
            f"{M}pool_validation_errors_total",
            group=PROJECT.group,
            prefix="PartitionCounterOutOfRange:",
        )

    for status in statuses.values():
        assert [c["type"] for c in status["conditions"]] == ["Complete"]
        [pool] = status["pools"]
        assert pool["validationError"] == (
            f'PartitionCounterOutOfRange: counter "memory" of counter set "gpu-0" in pool {far}/pool-1 '
            "cannot be computed exactly: its quantities are more than 4096 digits apart"
        )
        assert "partitionSummary" not in pool
    assert without_times(statuses[BUILTIN]) == without_times(statuses[PROJECT])
    assert errors == 1
