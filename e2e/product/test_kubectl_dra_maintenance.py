"""``kubectl dra taint``, ``untaint`` and ``drain`` against a real control plane.

The devicetaint and taintselector operators run under their own ServiceAccounts (module-scoped);
the plugin runs as a user runs it, in a subprocess whose stdin is not a terminal, so every change
needs ``--yes``. Pods are bound to fake nodes and their claims allocated as admin
(:mod:`e2e.devicetaint.world`); an evicted pod stays Terminating, since no kubelet finishes it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from demo import cleanup
from demo.maintenance import MAINTENANCE, UNTAINT
from demo.player import Player
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.devicetaint.world import PodPlan, World, create_bulk, open_world
from e2e.support import Tracker
from e2e.taintselector import support as ts
from operators.dra.taints import DeviceTaintSelector
from operators.kubectl_dra.errors import EXIT_OK, EXIT_PODS_REMAIN, EXIT_USAGE
from operators.kubectl_dra.taintmodel import CREATED_BY_LABEL, DEFAULT_KEY, NAME_LABEL, drain_name

pytestmark = pytest.mark.timeout(240)

RESOURCE = "/apis/resource.k8s.io/v1"
RULES = f"{RESOURCE}/devicetaintrules"
FOREVER = {"key": DEFAULT_KEY, "operator": "Exists", "effect": "NoExecute"}


@pytest.fixture(scope="module")
def operators(cluster: harness.Cluster, operator_identity: Callable[[str], str]) -> Iterator[None]:
    ts.install_crd(cluster)
    with contextlib.ExitStack() as stack:
        for name in ("devicetaint", "taintselector"):
            stack.enter_context(
                harness.operator_running(name, operator_identity(name), cluster.workdir, "subprocess", ())
            )
        yield


@pytest.fixture
def world(
    api: Kube, objects: Tracker, namespace: str, unique_name: Callable[[str], str], operators: None
) -> Iterator[World]:
    with open_world(api, objects, unique_name("node"), namespace) as opened:
        yield opened


@pytest.fixture
def dra(cluster: harness.Cluster) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "operators.kubectl_dra", *args, "--kubeconfig", cluster.kubeconfig],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
        )

    return run


def _terminating(world: World, name: str) -> bool:
    pod = world.pod_now(name)
    return bool(pod and pod["metadata"].get("deletionTimestamp"))


def _ours(api: Kube, path: str, name: str) -> list[dict[str, Any]]:
    return [
        o
        for o in api.list(path, labelSelector=f"{CREATED_BY_LABEL}=kubectl-dra,{NAME_LABEL}={name}")
        if o["metadata"]["labels"].get(NAME_LABEL) == name
    ]


def test_taint_asks_previews_waits_and_untaint_removes(
    world: World, driver_name: str, unique_name: Callable[[str], str], dra: Callable[..., Any]
) -> None:
    pool = world.node
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0", "gpu-1", "gpu-2"])
    world.allocated_pod("victim", driver_name, pool, ["gpu-0"])
    world.allocated_pod("keeper", driver_name, pool, ["gpu-1"], [FOREVER])
    name = unique_name("t")
    selector = f"driver={driver_name},pool={pool}"

    refused = dra("taint", selector, "--effect", "NoExecute", "--name", name)
    assert refused.returncode == EXIT_USAGE, refused.stderr
    assert "stdin is not a terminal: pass --yes" in refused.stderr
    assert "Preview of taint dra-operators.io/maintenance:NoExecute" in refused.stdout
    assert not _ours(world.api, RULES, name)

    dry = dra("taint", selector, "--effect", "NoExecute", "--name", name, "--dry-run")
    assert dry.returncode == EXIT_OK, dry.stderr
    assert "Dry run: nothing was tainted." in dry.stdout
    assert f"{world.namespace}/victim" in dry.stdout
    assert not _ours(world.api, RULES, name)

    started = time.monotonic()
    done = dra("taint", selector, "--effect", "NoExecute", "--name", name, "--yes", "--wait", "-o", "json")
    assert done.returncode == EXIT_OK, done.stderr
    document = json.loads(done.stdout)
    assert document["object"] == {"kind": "DeviceTaintRule", "name": name, "action": "created"}
    assert [d["device"] for d in document["preview"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert {(p["name"], p["evictionAfterSeconds"]) for p in document["preview"]["pods"]} == {
        ("victim", 0),
        ("keeper", None),
    }
    assert document["eviction"]["status"] == "False"
    assert "EvictionInProgress=" in done.stderr
    assert "Eviction over:" in done.stderr
    assert _terminating(world, "victim")
    assert not _terminating(world, "keeper")
    (rule,) = _ours(world.api, RULES, name)
    assert rule["spec"]["deviceSelector"] == {"driver": driver_name, "pool": pool}
    assert rule["spec"]["taint"]["effect"] == "NoExecute"
    print(f"taint --wait took {time.monotonic() - started:.1f}s")

    refused = dra("untaint", "--name", name)
    assert refused.returncode == EXIT_USAGE
    assert f"devicetaintrule/{name}" in refused.stdout
    assert _ours(world.api, RULES, name)
    removed = dra("untaint", "--name", name, "--yes", "-o", "yaml")
    assert removed.returncode == EXIT_OK, removed.stderr
    assert f"name: {name}" in removed.stdout
    assert not _ours(world.api, RULES, name)


def test_taint_by_class_is_a_device_taint_selector(
    world: World,
    driver_name: str,
    unique_name: Callable[[str], str],
    device_class: Callable[..., dict[str, Any]],
    dra: Callable[..., Any],
) -> None:
    pool = world.node
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0", "gpu-1"])
    world.allocated_pod("user", driver_name, pool, ["gpu-1"])
    klass = unique_name("class")
    device_class(klass, driver_name)
    name = unique_name("c")

    done = dra(
        "taint", "--class", klass, "--selector", f'device.driver == "{driver_name}"',
        "--name", name, "--yes", "-o", "json",
    )  # fmt: skip
    assert done.returncode == EXIT_OK, done.stderr
    document = json.loads(done.stdout)
    assert document["object"] == {"kind": "DeviceTaintSelector", "name": name, "action": "created"}
    assert [d["device"] for d in document["preview"]["devices"]] == ["gpu-0", "gpu-1"]
    assert [p["name"] for p in document["preview"]["pods"]] == ["user"]
    assert "taintselector operator (dry run): 2 published devices selected." in done.stderr
    (selector,) = _ours(world.api, ts.SELECTORS, name)
    assert selector["spec"]["deviceSelector"]["deviceClassName"] == klass
    assert selector["spec"]["taint"] == {"key": DEFAULT_KEY, "effect": "NoSchedule"}
    ts.wait_tainted(
        world.api, selector["metadata"]["uid"], {(driver_name, pool, "gpu-0"), (driver_name, pool, "gpu-1")}
    )
    preview_left = [
        r for r in world.api.list(ts.SELECTORS) if r["metadata"]["name"].startswith("kubectl-dra-")
    ]
    assert not preview_left

    removed = dra("untaint", "--class", klass, "--yes")
    assert removed.returncode == EXIT_OK, removed.stderr
    assert f"devicetaintselector/{name} deleted" in removed.stdout
    assert not _ours(world.api, ts.SELECTORS, name)


def test_drain_pool_evicts_what_does_not_tolerate(
    world: World, driver_name: str, unique_name: Callable[[str], str], dra: Callable[..., Any]
) -> None:
    pool = world.node
    devices = [f"gpu-{i}" for i in range(20)]
    world.resource_slice(unique_name("slice"), driver_name, pool, devices)
    plans = [
        PodPlan(f"p-{i}", driver_name, pool, device, (FOREVER,) if i % 5 == 0 else ())
        for i, device in enumerate(devices)
    ]
    create_bulk(world, plans)
    tolerating = {p.name for p in plans if p.tolerations}

    started = time.monotonic()
    done = dra("drain", "pool", f"{driver_name}/{pool}", "--yes", "--ignore-tolerating", "--timeout", "90s")
    took = time.monotonic() - started
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "Drained: no pod waits to be evicted, 4 tolerating forever stay" in done.stdout
    assert "NoExecute: " in done.stdout
    for plan in plans:
        assert _terminating(world, plan.name) == (plan.name not in tolerating), plan.name
    name = drain_name("pool", DeviceTaintSelector(driver=driver_name, pool=pool))
    (rule,) = _ours(world.api, RULES, name)
    assert rule["spec"]["taint"]["effect"] == "NoExecute"
    print(f"drain pool of 20 pods took {took:.1f}s")
    assert dra("untaint", "--name", name, "--yes").returncode == EXIT_OK


def test_drain_node_names_the_pods_that_remain(
    world: World, driver_name: str, unique_name: Callable[[str], str], dra: Callable[..., Any]
) -> None:
    pool = world.node
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0", "gpu-1"])
    world.allocated_pod("leaver", driver_name, pool, ["gpu-0"])
    world.allocated_pod("stayer", driver_name, pool, ["gpu-1"], [FOREVER])

    started = time.monotonic()
    done = dra("drain", "node", world.node, "--yes", "--grace", "2", "--timeout", "10s", "-o", "json")
    took = time.monotonic() - started
    assert done.returncode == EXIT_PODS_REMAIN, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["remaining"] == [{"namespace": world.namespace, "name": "stayer"}]
    # Both pods run through the grace period; then only the tolerating one is left.
    assert "NoSchedule: 2 to go" in done.stderr
    assert f"  {world.namespace}/stayer" in done.stderr
    assert "leaver" not in done.stderr.split("Pods remain")[1]
    assert 12 <= took < 60
    wait_for(lambda: _terminating(world, "leaver"), 10, "leaver to be evicted")
    assert not _terminating(world, "stayer")
    name = f"drain-node-{world.node}"
    assert dra("untaint", "--name", name, "--yes").returncode == EXIT_OK
    assert not _ours(world.api, RULES, name)


def test_the_readme_session(cluster: harness.Cluster, api: Kube, operators: None) -> None:
    """The kubectl dra session of docs/kubectl-dra.md (demo/maintenance.py), step by step, and its outcome."""
    player = Player(cluster.kubectl_path, cluster.kubeconfig)
    player.run(UNTAINT)
    cleanup.clean(api, MAINTENANCE)
    try:
        started = time.monotonic()
        outputs = [p.output for p in player.play(MAINTENANCE)]
        print(f"the docs/kubectl-dra.md session took {time.monotonic() - started:.1f}s")
    finally:
        player.run(UNTAINT)
        cleanup.clean(api, MAINTENANCE, wait=False)
        player.close()
    assert "devicetaintrule/gpu-3-repair created" in outputs[3]
    assert "devicetaintselector/flaky-gpu created" in outputs[4]
    assert "Eviction over: None of the 1 DeviceTaintRules has pods pending eviction." in outputs[4]
    assert (
        "Drained: no pod waits to be evicted, 1 tolerating forever stay (demo-maintenance/monitor)."
        in (outputs[5])
    )
    pods = {line.split()[0]: line.split()[2] for line in outputs[6].splitlines()[1:]}
    assert pods == {"monitor": "Pending", "trainer-0": "Terminating", "trainer-1": "Terminating"}
    assert outputs[7].count(" deleted") == 3
    assert not api.list(RULES, labelSelector=f"{CREATED_BY_LABEL}=kubectl-dra")
    assert not api.list(ts.SELECTORS, labelSelector=f"{CREATED_BY_LABEL}=kubectl-dra")
