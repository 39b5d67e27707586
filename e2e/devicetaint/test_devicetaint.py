"""devicetaint e2e: evictions by ResourceSlice taints and the toleration rules (spec §17).

The operator runs as a subprocess under its own ServiceAccount (the RBAC of ``manifests/``), with the
in-tree device-taint-eviction controller off. See :mod:`e2e.devicetaint.scenarios` for the timeline.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from e2e.devicetaint.scenarios import CASES, SliceMatrix
from e2e.devicetaint.world import (
    CANCELLING,
    COMPONENT,
    DISRUPTION,
    MARKING,
    World,
    disruption_target,
    metric,
)

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


def test_slice_taints_and_tolerations(world: World, driver_name: str, operator: Callable[..., Any]) -> None:
    """Scenarios 1-9, 11-14, 30 and 36 on one timeline."""
    world.api.patch(
        f"/api/v1/namespaces/{world.namespace}", {"metadata": {"labels": {ADMIN_ACCESS_LABEL: "true"}}}
    )
    with operator("devicetaint") as op:
        matrix = SliceMatrix(world, driver_name)
        matrix.setup()
        pods = matrix.run()
        assert matrix.mismatches(pods) == []
        evicted = [case.pod for case in CASES if case.ours is not None]
        text = op.metrics()
    assert metric(text, "dra_operators_devicetaint_pod_deletions_total") == len(evicted)
    assert metric(text, "dra_operators_devicetaint_pod_deletion_duration_seconds_count") == len(evicted)

    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in world.our_events():
        events[event["involvedObject"]["uid"]].append(event)
    for case in CASES:
        pod = pods[case.pod]
        assert pod is not None
        uid = pod["metadata"]["uid"]
        messages = [e["message"] for e in events[uid]]
        if case.pod in evicted:
            assert disruption_target(pod) == DISRUPTION
            assert messages == [MARKING], case.scenario
            (event,) = events[uid]
            assert event["type"] == "Normal"
            assert event["source"]["component"] == COMPONENT
            assert event["reportingComponent"] == COMPONENT
            assert event["involvedObject"]["kind"] == "Pod"
            assert event["count"] == 1
        elif case.pod == "p-s11":
            assert messages == [CANCELLING], case.scenario
        else:
            assert messages == [], case.scenario
    # Scenario 30: the pod replaced before its eviction time got no Event under either UID.
    assert events[matrix.uids["p-s30"]] == []
