"""devicetaint e2e: DeviceTaintRules, their ``EvictionInProgress`` condition, restarts (spec §17).

The rule scenarios share one timeline (see :mod:`e2e.devicetaint.scenarios`); the operator runs under its own
ServiceAccount and is SIGKILLed and restarted at the end for scenario 33.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e import harness
from e2e.devicetaint.scenarios import EVICTED, ONE_EVICTED, RuleBoard, deleted_at
from e2e.devicetaint.world import (
    CANCELLING,
    COMPONENT,
    DISRUPTION,
    MARKING,
    RESOURCE,
    World,
    disruption_target,
    drop_namespace,
    metric,
    parse_time,
)
from e2e.support import make_namespace

KOPF_MARK = "kopf.zalando.org"


@pytest.fixture
def second_namespace(api: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    name = make_namespace(api, request)
    yield name
    drop_namespace(api, name)


def test_rule_conditions_and_restart(
    cluster: harness.Cluster,
    world: World,
    second_namespace: str,
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    """Scenarios 10, 15-29, 31, 33, 37, 38 and 40."""
    board = RuleBoard(world, driver_name, second_namespace, unique_name("x"))
    board.setup()
    with operator("devicetaint") as op, ThreadPoolExecutor(1) as pool:
        waiting: list[Future[subprocess.CompletedProcess[str]]] = []

        def wait_with_kubectl() -> None:
            # Scenario 15: users wait for the end of an eviction with kubectl (r28 starts True).
            rule = f"devicetaintrule/{board.name('r28')}"
            args = ("wait", "--for=condition=EvictionInProgress=false", rule, "--timeout=60s")
            waiting.append(pool.submit(cluster.kubectl, *args, timeout=90))

        board.run(on_start=wait_with_kubectl)
        assert waiting[0].result().returncode == 0
        assert board.mismatches() == []
        text = op.metrics()
        # Scenario 31: the pod that was already terminating counts too.
        assert metric(text, "dra_operators_devicetaint_pod_deletions_total") == len(EVICTED) + 1
        _check_histories(board)
        _check_pods_and_events(board)
        _check_no_foreign_state(world, board)
        # Scenario 33 prepares: p38 goes for good, then the process dies.
        world.force_delete_pod("p38")
        op.kill()
    with operator("devicetaint"):
        for key in ("r38-a", "r38-b"):
            world.wait_rule(board.name(key), "False", "NotStarted", "", timeout=20)


def _check_histories(board: RuleBoard) -> None:
    created = {key: parse_time(value).timestamp() for key, value in board.created.items()}
    # Scenario 15, before 29 re-created the rule: Completed at generation 1.
    assert any(
        (r.status, r.reason, r.message, r.generation) == ("False", "Completed", ONE_EVICTED, 1)
        for r in board.history["r15"]
    )
    # Scenario 10: evicted at once although it tolerates for 60 s: the taint is an hour old.
    assert board.evicted_seen["p10"] <= 5
    # Scenario 18: NotStarted within 2 s of the creation.
    first = board.history["r18"][0]
    assert parse_time(first.transition).timestamp() - created["r18"] <= 2
    # Scenario 19 then 23: the dry run at generation 1, then at once generation 2, evicting p19.
    r19 = board.history["r19"]
    assert (r19[0].reason, r19[0].generation) == ("NoEffect", 1)
    assert r19[0].message.startswith("3 published devices selected. 1 allocated device selected. 1 pod would")
    edited = board.t0 + board.acted_at["r19-noexecute"]
    assert board.evicted_seen["p19"] >= board.acted_at["r19-noexecute"]
    gen2 = next(r for r in r19 if r.generation == 2)
    assert parse_time(gen2.transition).timestamp() - edited <= 3
    # kube-apiserver bumped timeAdded with the effect change (the clock of scenario 23's eviction).
    rule = board.world.api.get(f"{RESOURCE}/devicetaintrules/{board.name('r19')}")
    assert rule["metadata"]["generation"] == 2
    assert parse_time(rule["spec"]["taint"]["timeAdded"]).timestamp() >= created["r19"] + 5
    # Scenario 22: the dry run is not refreshed, lastTransitionTime included, for 30 s and more.
    assert len(board.history["r22"]) == 1
    assert board.elapsed() - board.acted_at["add-p22-late"] >= 30
    # Scenario 28: True first, writes at least 10 s apart, Completed within 20 s of the last eviction.
    r28 = board.history["r28"]
    assert (r28[0].status, r28[0].message) == ("True", "3 pods need to be evicted in 1 namespace.")
    times = board.transitions("r28")
    assert all(later - earlier >= 10 for earlier, later in itertools.pairwise(times)), times
    last = max(deleted_at(board.world.pod_now(f"p28-{s}") or {}) or _fail(s) for s in (0, 4, 8)).timestamp()
    assert times[-1] - last <= 20


def _fail(what: object) -> Any:
    raise AssertionError(f"p28-{what} is gone or not evicted")


def _check_pods_and_events(board: RuleBoard) -> None:
    world = board.world
    events: dict[str, list[str]] = {}
    for event in world.our_events():
        assert event["source"]["component"] == COMPONENT
        events.setdefault(event["involvedObject"]["uid"], []).append(f"{event['message']} x{event['count']}")
    for name in EVICTED:
        pod = world.pod_now(name)
        assert pod is not None
        assert disruption_target(pod) == DISRUPTION, name
        # Scenario 38: p38, hit by two rules, was deleted once.
        assert events.get(board.uids[name]) == [f"{MARKING} x1"], name
    # Scenario 24: the pending pod's eviction was cancelled when the effect became NoSchedule.
    assert events.get(board.uids["p24-c"]) == [f"{CANCELLING} x1"]
    # Scenario 31: nothing sent to a pod that was already terminating.
    p31 = world.pod_now("p31")
    assert p31 is not None
    assert disruption_target(p31) is None
    assert board.uids["p31"] not in events
    for name in ("p16-b", "p17", "p21-forever", "p21-600", "p22", "p37-a", "p37-b"):
        assert board.uids[name] not in events, name


def _check_no_foreign_state(world: World, board: RuleBoard) -> None:
    """Scenario 40: no kopf marks anywhere; our field manager owns only the rules' conditions."""
    api = world.api
    objects = [
        *api.list(f"/api/v1/namespaces/{world.namespace}/pods"),
        *api.list(f"{RESOURCE}/namespaces/{world.namespace}/resourceclaims"),
        *api.list(f"{RESOURCE}/resourceslices"),
        *api.list(f"{RESOURCE}/devicetaintrules"),
    ]
    for obj in objects:
        meta = obj["metadata"]
        assert not [a for a in meta.get("annotations", {}) if KOPF_MARK in a], meta["name"]
        assert not [f for f in meta.get("finalizers", []) if KOPF_MARK in f], meta["name"]
    for rule in api.list(f"{RESOURCE}/devicetaintrules"):
        ours = [m for m in rule["metadata"].get("managedFields", []) if m["manager"] == COMPONENT]
        assert ours, rule["metadata"]["name"]
        for entry in ours:
            assert entry["subresource"] == "status"
            assert set(entry["fieldsV1"]) == {"f:status"}
            assert set(entry["fieldsV1"]["f:status"]) == {"f:conditions"}


def test_empty_selector_matches_every_device(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    """Scenario 26: ``deviceSelector: {}`` selects every device, whatever its driver (kept alone in its
    test: it would evict the pods of every other scenario)."""
    world.resource_slice(f"{driver_name}-slice", driver_name, "node-1", ["gpu-0"])
    world.allocated_pod("p1", driver_name, "node-1", ["gpu-0"])
    world.allocated_pod("p-unpublished", f"other.{driver_name}", "elsewhere", ["dev-7"])
    with operator("devicetaint"):
        world.rule(unique_name("everything"), {}, cluster_wide=True)
        world.wait_terminating("p1", 10)
        world.wait_terminating("p-unpublished", 10)
