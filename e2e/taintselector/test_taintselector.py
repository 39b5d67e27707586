"""taintselector e2e: DeviceTaintSelectors turned into built-in DeviceTaintRules on a real control plane.

The operator runs as a subprocess under its own ServiceAccount (the RBAC of ``manifests/``); where a
NoExecute taint must evict, the devicetaint operator runs next to it, and where NoSchedule must keep
a pod off the devices, the real kube-scheduler decides.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.kube import Kube, WaitTimeout, wait_for
from devcluster.nodes import make_devices
from e2e import harness
from e2e.devicetaint.world import World, open_world
from e2e.resourceclaim.support import claim_body, create_claim, create_pod, named_entry, pod_body
from e2e.support import Tracker
from e2e.taintselector import support as ts

RESOURCE = "/apis/resource.k8s.io/v1"


@pytest.fixture(scope="module", autouse=True)
def crd(cluster: harness.Cluster) -> None:
    ts.install_crd(cluster)


@pytest.fixture
def world(api: Kube, objects: Tracker, namespace: str, unique_name: Callable[[str], str]) -> Iterator[World]:
    with open_world(api, objects, unique_name("node"), namespace) as opened:
        yield opened


def _metric(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_unique_id_selector_follows_the_physical_device(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    """CEL on a unique-ID attribute taints one device and evicts its pod (NoExecute); a device
    republished under the same name with another ID loses its taint, the new holder of the ID gets it;
    deleting the selector removes its rules."""
    api, pool, slice_name = world.api, world.node, unique_name("slice")
    uuids = {"gpu-0": "GPU-0000", "gpu-1": "GPU-1234", "gpu-2": "GPU-2222"}
    body = ts.uuid_devices(uuids, driver_name)
    world.objects.create(
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name},
            "spec": {
                "driver": driver_name,
                "nodeName": world.node,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": body,
            },
        },
    )
    world.allocated_pod("victim", driver_name, pool, ["gpu-1"])
    world.allocated_pod("bystander", driver_name, pool, ["gpu-2"])
    name = unique_name("uuid")
    with operator("taintselector") as op, operator("devicetaint"):
        created = ts.selector(
            world.objects,
            name,
            "NoExecute",
            driver=driver_name,
            expressions=[f'device.attributes["{driver_name}"].uuid == "GPU-1234"'],
        )
        uid = created["metadata"]["uid"]
        ts.wait_tainted(api, uid, {(driver_name, pool, "gpu-1")})
        ready = ts.wait_condition(api, name, "Ready", "True", "RulesInPlace")
        assert ready["message"] == "1 device selected, each tainted by its own DeviceTaintRule."
        current = api.get(f"{ts.SELECTORS}/{name}")
        assert current["status"]["selectedDevices"] == 1
        assert current["status"]["observedGeneration"] == current["metadata"]["generation"]
        (rule,) = ts.rules_of(api, uid)
        assert rule["metadata"]["ownerReferences"][0]["uid"] == uid
        assert rule["metadata"]["ownerReferences"][0]["controller"] is True
        assert rule["spec"]["taint"]["effect"] == "NoExecute"

        world.wait_terminating("victim", 30)
        bystander = world.pod_now("bystander")
        assert bystander is not None
        assert not bystander["metadata"].get("deletionTimestamp")
        # The devicetaint operator reports on the rule, and the selector aggregates it.
        ts.wait_condition(api, name, "EvictionInProgress", "False", "NoPodsPending", timeout=40)

        # The driver replaced the card: gpu-1 is now another physical device, and GPU-1234 came back
        # as gpu-3. Republished as generation 2 of the pool.
        current_slice = api.get(f"{RESOURCE}/resourceslices/{slice_name}")
        current_slice["spec"]["pool"]["generation"] = 2
        current_slice["spec"]["devices"] = ts.uuid_devices(
            {"gpu-0": "GPU-0000", "gpu-1": "GPU-5678", "gpu-2": "GPU-2222", "gpu-3": "GPU-1234"}, driver_name
        )
        api.replace(f"{RESOURCE}/resourceslices/{slice_name}", current_slice)
        ts.wait_tainted(api, uid, {(driver_name, pool, "gpu-3")})
        ts.wait_condition(api, name, "Ready", "True", "RulesInPlace")
        assert op.ready()

        text = op.metrics()
        assert _metric(text, "dra_operators_taintselector_selected_devices", f'selector="{name}"') == 1
        assert _metric(text, "dra_operators_taintselector_rule_writes_total", 'operation="create"') >= 2
        assert _metric(text, "dra_operators_taintselector_rule_writes_total", 'operation="delete"') >= 1

        # Deleting the selector removes its rules (owner references, garbage collector).
        api.delete(f"{ts.SELECTORS}/{name}")
        wait_for(lambda: ts.rules_of(api, uid) == [], 60, "the selector's rules to be collected")
        assert op.ready()
        assert op.alive()


def test_device_class_selector_keeps_new_pods_off_its_devices(
    world: World,
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
    namespace: str,
) -> None:
    """A DeviceClass selector taints exactly the class's devices; with NoSchedule the real scheduler
    leaves a pod that needs the class unschedulable, while the class of the untainted devices still
    schedules (the control)."""
    api, objects = world.api, world.objects
    objects.resource_slice(world.node, driver_name, make_devices(4, prefix="gpu"))
    tainted_class, free_class = unique_name("low"), unique_name("high")
    attr = f'device.attributes["{driver_name}"].index'
    objects.device_class(tainted_class, driver_name, [f"{attr} < 2"])
    objects.device_class(free_class, driver_name, [f"{attr} >= 2"])
    name = unique_name("class")
    with operator("taintselector") as op:
        created = ts.selector(objects, name, "NoSchedule", device_class=tainted_class)
        uid = created["metadata"]["uid"]
        pool = world.node
        ts.wait_tainted(api, uid, {(driver_name, pool, "gpu-0"), (driver_name, pool, "gpu-1")})
        ts.wait_condition(api, name, "Ready", "True", "RulesInPlace")
        assert api.get(f"{ts.SELECTORS}/{name}")["status"]["selectedDevices"] == 2

        blocked = _scheduled_pod(api, namespace, "blocked", tainted_class)
        free = _scheduled_pod(api, namespace, "free", free_class)
        wait_for(lambda: _node_of(api, namespace, free) == world.node, 60, "the control pod to be scheduled")

        def unschedulable() -> bool:
            pod = api.get(f"/api/v1/namespaces/{namespace}/pods/{blocked}")
            conditions = {c["type"]: c for c in pod.get("status", {}).get("conditions", [])}
            scheduled = conditions.get("PodScheduled", {})
            return bool(scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable")

        wait_for(unschedulable, 60, "the pod needing tainted devices to be unschedulable")
        with pytest.raises(WaitTimeout):
            wait_for(lambda: _node_of(api, namespace, blocked), 5, "the blocked pod to stay unscheduled")
        assert op.ready()


def _scheduled_pod(api: Kube, namespace: str, name: str, device_class: str) -> str:
    create_claim(api, namespace, claim_body(name, request="gpu", device_class=device_class))
    create_pod(api, namespace, pod_body(name, [named_entry("gpu", name)], scheduled=True))
    return name


def _node_of(api: Kube, namespace: str, pod: str) -> str | None:
    current = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    node: str | None = (current or {}).get("spec", {}).get("nodeName")
    return node


def test_invalid_selectors_create_no_rule_and_keep_old_ones(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    """Bad CEL, an unknown DeviceClass and a missing attribute each give Invalid=True with the
    expression and the error, a Warning Event, no rule, and no crash; a valid selector made invalid
    keeps its rules, and fixing it recovers."""
    api, objects = world.api, world.objects
    objects.resource_slice(world.node, driver_name, make_devices(3, prefix="gpu"))
    attrs = f'device.attributes["{driver_name}"]'
    bad_cel = f"{attrs}.index >"
    missing = f'{attrs}.serial == "S-1"'
    cases: dict[str, tuple[str, dict[str, Any], str]] = {
        "cel": ("InvalidCEL", {"driver": driver_name, "expressions": [bad_cel]}, bad_cel),
        "class": ("UnknownDeviceClass", {"device_class": "no-such-class-e2e"}, "no-such-class-e2e"),
        "attr": ("CELRuntimeError", {"driver": driver_name, "expressions": [missing]}, missing),
    }
    with operator("taintselector") as op:
        uids = {}
        for key, (_reason, kwargs, _needle) in cases.items():
            created = ts.selector(objects, unique_name(key), "NoExecute", **kwargs)
            uids[key] = (created["metadata"]["name"], created["metadata"]["uid"])
        valid = ts.selector(
            objects,
            unique_name("valid"),
            "NoSchedule",
            driver=driver_name,
            expressions=[f"{attrs}.index == 1"],
        )
        valid_name, valid_uid = valid["metadata"]["name"], valid["metadata"]["uid"]
        ts.wait_tainted(api, valid_uid, {(driver_name, world.node, "gpu-1")})

        for key, (reason, _kwargs, needle) in cases.items():
            name, uid = uids[key]
            invalid = ts.wait_condition(api, name, "Invalid", "True", reason)
            assert needle in invalid["message"], invalid["message"]
            ready = ts.wait_condition(api, name, "Ready", "False", "Invalid")
            assert needle in ready["message"]
            assert ts.rules_of(api, uid) == []
            wait_for(functools.partial(ts.warning_events, api, name), 30, f"a Warning Event on {name}")
        assert "no such key" in (ts.condition(api, uids["attr"][0], "Invalid") or {})["message"]

        # A valid selector whose spec turns invalid keeps its rules (and its selectedDevices).
        api.patch(
            f"{ts.SELECTORS}/{valid_name}",
            {"spec": {"deviceSelector": {"selectors": [{"cel": {"expression": bad_cel}}]}}},
        )
        ts.wait_condition(api, valid_name, "Invalid", "True", "InvalidCEL")
        assert ts.tainted(api, valid_uid) == {(driver_name, world.node, "gpu-1")}
        assert api.get(f"{ts.SELECTORS}/{valid_name}")["status"]["selectedDevices"] == 1

        # Fixing it recovers: the new selection replaces the old rule.
        api.patch(
            f"{ts.SELECTORS}/{valid_name}",
            {"spec": {"deviceSelector": {"selectors": [{"cel": {"expression": f"{attrs}.index >= 1"}}]}}},
        )
        ts.wait_tainted(
            api, valid_uid, {(driver_name, world.node, "gpu-1"), (driver_name, world.node, "gpu-2")}
        )
        ts.wait_condition(api, valid_name, "Invalid", "False", "Valid")
        ts.wait_condition(api, valid_name, "Ready", "True", "RulesInPlace")

        assert op.ready()
        assert op.alive()
        text = op.metrics()
        assert _metric(text, "dra_operators_taintselector_evaluations_total", 'result="invalid"') >= 3


def test_dry_run_counts_each_pod_once_over_the_selection(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    """Issue #27: an effect-None selector reports the dry run of the whole selection; a pod on two
    selected devices (through two claims) is one pod, where the rules' own dry runs would count it
    twice; a pod whose claim tolerates the taint forever is not counted."""
    api, pool = world.api, world.node
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0", "gpu-1", "gpu-2"])
    pod = world.pod("two-gpus", ["two-a", "two-b"])
    world.claim("two-a", driver_name, pool, ["gpu-0"], [pod])
    world.claim("two-b", driver_name, pool, ["gpu-1"], [pod])
    forever = {"key": ts.KEY, "operator": "Exists", "effect": "NoExecute"}
    world.allocated_pod("tolerant", driver_name, pool, ["gpu-2"], tolerations=[forever])
    name = unique_name("dry")
    with operator("taintselector"):
        ts.selector(world.objects, name, "None", driver=driver_name)
        expected = {"publishedDevices": 3, "allocatedDevices": 3, "claims": 3, "pods": 1, "namespaces": 1}

        def reported() -> dict[str, Any] | None:
            status = (api.get(f"{ts.SELECTORS}/{name}").get("status")) or {}
            return status if status.get("dryRun") == expected else None

        status = wait_for(reported, 30, f"the dry run {expected}")
        assert status is not None
        eviction = ts.wait_condition(api, name, "EvictionInProgress", "False", "NoEffect")
        assert eviction["message"] == (
            "3 published devices selected. 3 allocated devices selected. 3 claims are allocated on them. "
            "1 pod would be evicted in 1 namespace if the effect was NoExecute."
        )
        # The pod leaves its claims: the next dry run has nothing left to evict.
        for claim in ("two-a", "two-b"):
            world.allocate(claim, driver_name, pool, ["gpu-0" if claim == "two-a" else "gpu-1"], [])
        wait_for(
            lambda: (
                (api.get(f"{ts.SELECTORS}/{name}").get("status") or {}).get("dryRun", {}).get("pods") == 0
            ),
            30,
            "the dry run to follow the released claims",
        )
