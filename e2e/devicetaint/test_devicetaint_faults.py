"""devicetaint e2e: failing DELETEs and the exact requests of an eviction (spec §17, scenarios 1 and 32).

A recording admission webhook (see :mod:`e2e.devicetaint.support`) refuses the first three DELETEs of p1
with status 500 and records every DELETE and ``pods/status`` update, so the test can count the writes
and read the DELETE's options, which the API keeps nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.kube import wait_for
from e2e.devicetaint.support import LABEL, recording_webhook
from e2e.devicetaint.world import (
    DISRUPTION,
    MARKING,
    World,
    metric,
    taint,
)

OPERATOR_USER = "system:serviceaccount:dra-operators:dra-operators-devicetaint"


def test_delete_failures_are_retried(
    world: World, driver_name: str, unique_name: Callable[[str], str], operator: Callable[..., Any]
) -> None:
    api, namespace = world.api, world.namespace
    hook = unique_name("recorder")
    labels = {LABEL: hook}
    with recording_webhook(api, hook) as recorder:
        probe = world.pod("probe", bound=False, labels=labels)
        probe_path = f"/api/v1/namespaces/{namespace}/pods/probe"
        dry_run = {"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]}
        wait_for(
            lambda: api.request("DELETE", probe_path, body=dry_run) and recorder.deletes(),
            30,
            "the webhook to be called",
        )
        assert probe["metadata"]["uid"]
        with recorder.lock:
            recorder.fail_deletes = 3
        slice_name = f"{driver_name}-slice"
        world.resource_slice(slice_name, driver_name, "node-1", ["gpu-0", "gpu-1", "gpu-2"])
        p1 = world.allocated_pod("p1", driver_name, "node-1", ["gpu-0"], labels=labels)
        uid = p1["metadata"]["uid"]
        with operator("devicetaint") as op:
            world.set_slice_taints(slice_name, {"gpu-0": [taint()]})
            evicted = world.wait_terminating("p1", 10)
            text = op.metrics()
        deletes = [r for r in recorder.deletes() if r["name"] == "p1"]
        updates = [r for r in recorder.status_updates(OPERATOR_USER) if r["name"] == "p1"]

    # Scenario 1: a plain DELETE with the UID precondition, not the Eviction API.
    assert [r["userInfo"]["username"] for r in deletes] == [OPERATOR_USER] * 4
    assert all(r["options"]["preconditions"] == {"uid": uid} for r in deletes)
    assert all(not r.get("subResource") for r in deletes)
    # Scenario 32: one status write, one condition, one Event counted once per attempt.
    assert len(updates) == 1
    conditions = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [{k: c[k] for k in DISRUPTION} for c in conditions] == [DISRUPTION]
    events = [e for e in world.our_events() if e["involvedObject"]["uid"] == uid]
    assert [(e["message"], e["count"]) for e in events] == [(MARKING, 4)]
    assert metric(text, "dra_operators_devicetaint_pod_deletions_total") == 1
