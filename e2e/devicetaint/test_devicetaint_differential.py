"""devicetaint e2e, differential: the same scenarios on our cluster and on upstream's (spec §17, scenario 41).

Both clusters get the same slices, claims, pods and rules: ours with our operator and the in-tree
device-taint-eviction controller off, the upstream cluster with kube-controller-manager's in-tree DRA
controllers on. The matrix of slice-taint scenarios and the board of rule scenarios then run on both at
once. Expected to match: which pods are evicted (inside the same windows), the Events on each pod, and
every rule's condition type, status, reason and message. Expected to differ (spec §16, row 1): the
empty-effect tolerations of scenario 6 and the empty-effect dry run of scenario 21; those cases carry
upstream's own expectation. Row 2 (extended-resource claims, scenario 14) turned out not to differ:
upstream 1.37.2 evicts those pods too. Scenarios 12 ("not reserved") and 30 cannot be reproduced on the
upstream cluster, whose in-tree resourceclaim controller reserves claims for bound pods; they are
excluded from the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e.devicetaint.scenarios import CASES, EXPECTED, UPSTREAM_DIFFERS, RuleBoard, SliceMatrix
from e2e.devicetaint.world import World, drop_namespace, open_world
from e2e.support import Tracker, make_namespace

pytestmark = pytest.mark.differential

ADMIN_ACCESS = {"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}}
DIFFERENT_PODS = {case.pod for case in CASES if case.ours != case.upstream}


@pytest.fixture
def namespaces(
    api: Kube, upstream_api: Kube, request: pytest.FixtureRequest
) -> Iterator[tuple[str, list[str]]]:
    """Our second namespace and upstream's two."""
    ours = make_namespace(api, request)
    theirs = [make_namespace(upstream_api, request) for _ in range(2)]
    yield ours, theirs
    drop_namespace(api, ours)
    for name in theirs:
        drop_namespace(upstream_api, name)


@pytest.fixture
def upstream_world(
    upstream_api: Kube, namespaces: tuple[str, list[str]], unique_name: Callable[[str], str]
) -> Iterator[tuple[World, str]]:
    tracker = Tracker(upstream_api)
    theirs = namespaces[1]
    try:
        with open_world(upstream_api, tracker, unique_name("node"), theirs[0], theirs[1:]) as world:
            yield world, theirs[1]
    finally:
        tracker.cleanup()


def test_same_evictions_and_conditions_as_upstream(
    api: Kube,
    objects: Tracker,
    namespace: str,
    namespaces: tuple[str, list[str]],
    upstream_world: tuple[World, str],
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    our_second_namespace = namespaces[0]
    with open_world(api, objects, unique_name("node"), namespace, [our_second_namespace]) as ours:
        compare_with_upstream(ours, our_second_namespace, upstream_world, driver_name, unique_name, operator)


def compare_with_upstream(
    ours: World,
    our_second_namespace: str,
    upstream_world: tuple[World, str],
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    theirs, their_second_namespace = upstream_world
    suffix = unique_name("d")
    for world in (ours, theirs):
        world.api.patch(f"/api/v1/namespaces/{world.namespace}", ADMIN_ACCESS)
    # Two drivers per cluster: the matrix's taints must not reach the board's pods and vice versa.
    matrices = [SliceMatrix(ours, f"m.{driver_name}"), SliceMatrix(theirs, f"m.{driver_name}", upstream=True)]
    boards = [
        RuleBoard(ours, f"r.{driver_name}", our_second_namespace, suffix),
        RuleBoard(theirs, f"r.{driver_name}", their_second_namespace, suffix, upstream=True),
    ]
    for matrix in matrices:
        matrix.setup()
    for board in boards:
        board.setup()
    with operator("devicetaint"), ThreadPoolExecutor(4) as pool:
        matrix_runs = [pool.submit(matrix.run) for matrix in matrices]
        board_runs = [pool.submit(board.run) for board in boards]
        results = [run.result() for run in matrix_runs]
        for run in board_runs:
            run.result()

    # Each cluster meets its expectations, which are the same except for the documented differences.
    assert matrices[0].mismatches(results[0]) == []
    assert matrices[1].mismatches(results[1]) == []
    assert boards[0].mismatches() == []
    assert boards[1].mismatches() == []
    ours_evicted, theirs_evicted = (set(_evicted(m, r)) for m, r in zip(matrices, results, strict=True))
    assert ours_evicted - DIFFERENT_PODS == theirs_evicted - DIFFERENT_PODS
    for key in EXPECTED:
        if key in UPSTREAM_DIFFERS:
            continue
        mine, upstream = boards[0].final(key), boards[1].final(key)
        assert (mine.status, mine.reason, mine.message) == (
            upstream.status,
            upstream.reason,
            upstream.message,
        ), key
    # The board's pods share the namespace with the matrix's.
    board_evicted = [{name for name in board.evicted_seen if name in board.uids} for board in boards]
    assert board_evicted[0] == board_evicted[1]
    # The same "Marking for deletion" Events, pod by pod, in both clusters (their source differs:
    # section 16, row 6). "Cancelling deletion" is left out: whether an eviction was scheduled at
    # all before the change that cancels it depends on which watch event each controller handled
    # first, so either controller may emit it or not (seen both ways in CI runs).
    assert _event_messages(ours, DIFFERENT_PODS) == _event_messages(theirs, DIFFERENT_PODS)


def _evicted(matrix: SliceMatrix, pods: dict[str, dict[str, Any] | None]) -> list[str]:
    return [name for name, seconds in matrix.evictions(pods).items() if seconds is not None]


def _event_messages(world: World, skip: set[str]) -> dict[str, list[str]]:
    messages: dict[str, list[str]] = {}
    for event in world.our_events():
        name = event["involvedObject"]["name"]
        if name not in skip and event["message"] != "Cancelling deletion":
            messages.setdefault(name, []).append(event["message"])
    return {name: sorted(found) for name, found in messages.items()}
