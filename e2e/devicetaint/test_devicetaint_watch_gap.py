"""devicetaint e2e: a DeviceTaintRule deleted while the operator's watches were down.

The informer's 410 path on a real kube-apiserver, not a stub: the operator is frozen (SIGSTOP), so
its watches end with kube-apiserver's restart and nothing is read in between. The rule is deleted,
pods arrive, and etcd's history is compacted, so that resuming from any resourceVersion the
operator holds is answered 410 Gone. The re-list then hands the deleted rule over as a tombstone,
and the operator must stop enforcing it: before tombstones were handled, the rule stayed cached
and went on evicting pods until a restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from devcluster import launcher
from devcluster.kube import wait_for
from e2e import harness
from e2e.devicetaint.world import RESOURCE, World, disruption_target

RESYNCED = ("pods", "resourceclaims", "devicetaintrules")


@contextlib.contextmanager
def frozen(op: harness.RunningOperator) -> Iterator[None]:
    """The operator's process stopped, not ended: its connections stay open until the server ends them."""
    assert op.process is not None, "freezing needs subprocess mode"
    os.killpg(op.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(op.process.pid, signal.SIGCONT)


def _queue_idle(op: harness.RunningOperator) -> bool:
    text = op.metrics()
    return (
        harness.metric(text, "dra_operators_workqueue_depth", name="devicetaint") == 0
        and harness.metric(text, "dra_operators_workqueue_unfinished_work_seconds", name="devicetaint") == 0
    )


def _relisted(op: harness.RunningOperator) -> bool:
    text = op.metrics()
    relists = "dra_operators_informer_relists_total"
    counts = [harness.metric(text, relists, resource=plural, reason="gone") for plural in RESYNCED]
    return all(count is not None and count >= 1 for count in counts)


def test_a_rule_deleted_during_a_watch_gap_evicts_no_more(
    cluster: harness.Cluster,
    world: World,
    driver_name: str,
    unique_name: Callable[[str], str],
    operator: Callable[..., Any],
) -> None:
    assert cluster.state is not None
    directory = Path(cluster.state.dir)
    api = world.api
    pool = "pool-gap"
    world.resource_slice(unique_name("gap"), driver_name, pool, ["gpu-0", "gpu-1"])
    gone_rule, kept_rule = unique_name("gone"), unique_name("kept")
    with operator("devicetaint") as op:
        world.rule(gone_rule, {"driver": driver_name, "pool": pool, "device": "gpu-0"})
        world.wait_rule(gone_rule, "False", "NotStarted", "", timeout=30)
        with frozen(op):
            launcher.stop_component(directory, "kube-apiserver")
            launcher.start_component(directory, "kube-apiserver")
            api.delete(f"{RESOURCE}/devicetaintrules/{gone_rule}")
            # The gap's other news: a rule that must evict, and a pod under each rule's device.
            world.rule(kept_rule, {"driver": driver_name, "pool": pool, "device": "gpu-1"})
            spared = world.allocated_pod("spared", driver_name, pool, ["gpu-0"])
            world.allocated_pod("evicted", driver_name, pool, ["gpu-1"])
            launcher.compact_etcd(directory)
        wait_for(lambda: _relisted(op), 60, f"410 Gone and a re-list of {', '.join(RESYNCED)}")
        # The kept rule's eviction shows that the re-listed pods and claims were taken in; once the
        # queue is idle, the spared pod's key (queued by the same re-list) has been decided too.
        world.wait_terminating("evicted", 30)
        wait_for(lambda: _queue_idle(op), 30, "the devicetaint work queue to be idle")
        text = op.metrics()
    pod = world.pod_now("spared")
    assert pod is not None
    assert pod["metadata"]["uid"] == spared["metadata"]["uid"]
    assert not pod["metadata"].get("deletionTimestamp"), "the deleted rule still evicted a pod"
    assert disruption_target(pod) is None, "the deleted rule marked the pod for eviction"
    assert harness.metric(text, "dra_operators_devicetaint_pod_deletions_total") == 1
