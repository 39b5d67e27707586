"""Deletions the device-health controller sees only as tombstones: after a 410 Gone re-list (or for
its own policies, a re-list at start) an object that vanished in the gap reaches its delete handler
with its kind, name, namespace and UID only. Deleting by tombstone must change what deleting by the
full object changes, and the tombstone of an earlier object of that name must change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import devicehealth_builders as build
import pytest
from test_devicehealth_controller import KEY, FakeRuntime, started
from tombstone_support import tombstone_tests

from operators.core.keys import Key
from operators.devicehealth.controller import DeviceHealthController

Delete = Callable[[DeviceHealthController, Mapping[str, Any]], None]

POLICY = build.policy_body(max_unavailable=2)
SLICE = build.slice_body(
    "node-1",
    build.device("gpu-0", unhealthy_since=build.at(0)),
    build.device("gpu-1", unhealthy_since=build.at(0)),
)
DEVICE_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpus", "uid": "uid-gpus"},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{build.GPU}'"}}]},
}
POD = build.pod_body(
    "train", {"claim:gpu/gpu": [(f"{build.GPU}/node-1/gpu-0", "Unhealthy")]}, claims={"gpu": "c"}
)
CLAIM = build.claim_body("c", ("gpu", "node-1", "gpu-0"), pods=("train",))
OWNED_RULE = build.rule_body(build.gpu("node-1", "gpu-0"), time_added=build.at(0))
# A user's rule under the name the policy's rule for gpu-1 would take: it holds gpu-1 untainted.
NAMESAKE: dict[str, Any] = {
    **build.rule_body(build.gpu("node-1", "gpu-1")),
    "metadata": {
        "name": build.rule_body(build.gpu("node-1", "gpu-1"))["metadata"]["name"],
        "uid": "uid-users-own",
    },
}

KINDS = [
    pytest.param(DeviceHealthController.delete_policy, POLICY, "policies", "gpu-health", id="policy"),
    pytest.param(DeviceHealthController.delete_slice, SLICE, "slices", SLICE["metadata"]["name"], id="slice"),
    pytest.param(DeviceHealthController.delete_class, DEVICE_CLASS, "classes", "gpus", id="class"),
    pytest.param(DeviceHealthController.delete_pod, POD, "pods", "team-a/train", id="pod"),
    pytest.param(DeviceHealthController.delete_claim, CLAIM, "claims", "team-a/c", id="claim"),
    pytest.param(
        DeviceHealthController.delete_rule, OWNED_RULE, "rules", OWNED_RULE["metadata"]["name"], id="rule"
    ),
    pytest.param(
        DeviceHealthController.delete_rule,
        NAMESAKE,
        "rule_controllers",
        NAMESAKE["metadata"]["name"],
        id="rule-of-someone-else",
    ),
]


@dataclass(frozen=True)
class Outcome:
    """What a deletion changed: what it queued, what the cache and the controller keep, and what
    the policy's next pass writes."""

    queued: list[Key]
    cached: dict[str, list[str]]
    counted: list[str]
    tracked: list[str]
    next_pass: list[tuple[str, str, Any]]


async def cluster() -> tuple[DeviceHealthController, FakeRuntime]:
    """One policy over a slice whose two devices report unhealthy: gpu-0 tainted by the policy's
    rule and in use by a pod's claim, gpu-1 held by a rule of someone else's of the same name."""
    controller, runtime = await started(build.at(61))
    controller.upsert_policy(POLICY)
    controller.upsert_slice(SLICE)
    controller.upsert_class(DEVICE_CLASS)
    controller.upsert_pod(POD)
    controller.upsert_claim(CLAIM)
    controller.upsert_rule(OWNED_RULE)
    controller.upsert_rule(NAMESAKE)
    await controller.sync(KEY)
    assert controller.counts
    assert controller.tracks
    runtime.queue.added.clear()
    return controller, runtime


async def outcome_of(delete: Delete, body: Mapping[str, Any]) -> Outcome:
    controller, runtime = await cluster()
    delete(controller, body)
    queued = [key for key, _ in runtime.queue.added]
    cache = controller.cache
    cached = {
        "policies": sorted(cache.policies),
        "slices": sorted(cache.slices),
        "classes": sorted(cache.classes),
        "pods": sorted(f"{namespace}/{name}" for namespace, name in cache.pods),
        "claims": sorted(f"{namespace}/{name}" for namespace, name in cache.claims),
        "rules": sorted(cache.rules),
        "rule_controllers": sorted(cache.rule_controllers),
    }
    written = len(runtime.client.calls)
    await controller.sync(KEY)
    return Outcome(
        queued=queued,
        cached=cached,
        counted=sorted(controller.counts),
        tracked=sorted(controller.tracks),
        next_pass=runtime.client.calls[written:],
    )


(
    test_a_deletion_seen_as_a_tombstone_changes_what_the_full_object_does,
    test_the_tombstone_of_an_earlier_object_of_that_name_changes_nothing,
) = tombstone_tests(outcome_of, KINDS)
