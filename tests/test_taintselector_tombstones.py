"""Deletions the taint-selector controller sees only as tombstones: after a 410 Gone re-list (or for
its own selectors, a re-list at start) an object that vanished in the gap reaches its delete handler
with its kind, name, namespace and UID only. Deleting by tombstone must change what deleting by the
full object changes, and the tombstone of an earlier object of that name must change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, cast
from unittest import mock

import pytest
from runtime_support import ServingClient
from taintselector_builders import GPU_DRIVER, dev
from tombstone_support import tombstone_tests

from operators.core import conditions
from operators.core.discovery import ServedResource
from operators.core.events import ObjectRef
from operators.core.keys import Key
from operators.core.runtime import Runtime
from operators.taintselector.controller import SELECTOR, TaintSelectorController
from operators.taintselector.models import DeviceId, TaintSelector
from operators.taintselector.rules import desired_rules, rule_name

Delete = Callable[[TaintSelectorController, Mapping[str, Any]], None]

RULES_API = ServedResource("resource.k8s.io", "v1", "devicetaintrules", False, kind="DeviceTaintRule")
NAME = "gpus-dry-run"
KEY = Key(SELECTOR, "", NAME)
GPU_0 = DeviceId(GPU_DRIVER, "node-1", "gpu-0")
GPU_1 = DeviceId(GPU_DRIVER, "node-1", "gpu-1")

# A dry run (effect None) over a class: claims, classes, slices and rules all concern it.
SELECTOR_BODY: dict[str, Any] = {
    "apiVersion": "dra-operators.io/v1alpha1",
    "kind": "DeviceTaintSelector",
    "metadata": {"name": NAME, "uid": "uid-selector", "generation": 1},
    "spec": {
        "taint": {"key": "dra.example.com/unhealthy", "value": "Broken", "effect": "None"},
        "deviceSelector": {"deviceClassName": "gpus"},
    },
}
DEVICE_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpus", "uid": "uid-gpus"},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{GPU_DRIVER}'"}}]},
}
SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpus", "uid": "uid-slice"},
    "spec": {
        "driver": GPU_DRIVER,
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [dev("gpu-0"), dev("gpu-1")],
    },
}
CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-claim"},
    "status": {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": "node-1", "device": "gpu-0"}]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "uid-pod"}],
    },
}
_OWNED = desired_rules(TaintSelector.model_validate(SELECTOR_BODY), [GPU_0], RULES_API.api_version)
OWNED_RULE: dict[str, Any] = {
    **_OWNED[rule_name(NAME, GPU_0)],
    "metadata": {**_OWNED[rule_name(NAME, GPU_0)]["metadata"], "uid": "uid-rule"},
}
# A rule of someone else's under the name the selector's rule for gpu-1 would take: a conflict.
NAMESAKE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": rule_name(NAME, GPU_1), "uid": "uid-users-own"},
    "spec": {
        "deviceSelector": {"driver": GPU_DRIVER, "pool": "node-1", "device": "gpu-1"},
        "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
    },
}

KINDS = [
    pytest.param(TaintSelectorController.delete_selector, SELECTOR_BODY, "selectors", NAME, id="selector"),
    pytest.param(TaintSelectorController.delete_slice, SLICE, "slices", "node-1-gpus", id="slice"),
    pytest.param(TaintSelectorController.delete_class, DEVICE_CLASS, "classes", "gpus", id="class"),
    pytest.param(TaintSelectorController.delete_claim, CLAIM, "claims", "ml/trainer", id="claim"),
    pytest.param(TaintSelectorController.delete_rule, OWNED_RULE, "rules", rule_name(NAME, GPU_0), id="rule"),
    pytest.param(
        TaintSelectorController.delete_rule,
        NAMESAKE,
        "rules",
        rule_name(NAME, GPU_1),
        id="rule-of-someone-else",
    ),
]


@dataclass
class FakeQueue:
    added: list[Key] = field(default_factory=list)

    def add_after(self, key: Key, delay: float) -> None:
        self.added.append(key)


@dataclass
class FakeEvents:
    recorded: list[tuple[str, str]] = field(default_factory=list)

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorded.append((reason, message))


@dataclass
class FakeRuntime:
    client: ServingClient = field(default_factory=lambda: ServingClient({}))
    queue: FakeQueue = field(default_factory=FakeQueue)
    events: FakeEvents = field(default_factory=FakeEvents)
    field_manager: str = "dra-operators-taintselector"

    def served_resource(self, group: str, plural: str) -> ServedResource | None:
        return RULES_API if (group, plural) == (RULES_API.group, RULES_API.plural) else None


@dataclass(frozen=True)
class Outcome:
    """What a deletion changed: what it queued, what the cache and the controller keep, and what
    the selector's next pass writes and records."""

    queued: list[Key]
    cached: dict[str, list[str]]
    selected: dict[str, int]
    next_pass: list[tuple[str, str, Any]]
    events: list[tuple[str, str]]


async def cluster() -> tuple[TaintSelectorController, FakeRuntime]:
    """The selector, in sync: its rule on gpu-0, where a claim is allocated, and a conflict on gpu-1."""
    runtime = FakeRuntime()
    controller = TaintSelectorController(cast(Runtime, runtime))
    assert await controller.prepare()
    controller.upsert_selector(SELECTOR_BODY)
    controller.upsert_class(DEVICE_CLASS)
    controller.upsert_slice(SLICE)
    controller.upsert_claim(CLAIM)
    controller.upsert_rule(OWNED_RULE)
    controller.upsert_rule(NAMESAKE)
    await controller.sync(KEY)
    assert controller.selected == {NAME: 2}
    runtime.queue.added.clear()
    runtime.events.recorded.clear()
    return controller, runtime


class StoppedClock(datetime):
    @classmethod
    def now(cls, tz: tzinfo | None = None) -> StoppedClock:
        return cls(2026, 12, 5, 12, 0, tzinfo=UTC)


async def outcome_of(delete: Delete, body: Mapping[str, Any]) -> Outcome:
    # A condition is stamped with the wall clock, to the second: two outcomes compared must not
    # straddle a second.
    with mock.patch.object(conditions, "datetime", StoppedClock):
        return await _outcome_of(delete, body)


async def _outcome_of(delete: Delete, body: Mapping[str, Any]) -> Outcome:
    controller, runtime = await cluster()
    delete(controller, body)
    queued = list(runtime.queue.added)
    cache = controller.cache
    cached = {
        "selectors": sorted(cache.selectors),
        "slices": sorted(cache.slices),
        "classes": sorted(cache.classes),
        "claims": sorted(cache.claims),
        "rules": sorted(cache.rules),
    }
    written = len(runtime.client.calls)
    await controller.sync(KEY)
    return Outcome(
        queued=queued,
        cached=cached,
        selected=dict(controller.selected),
        next_pass=runtime.client.calls[written:],
        events=runtime.events.recorded,
    )


(
    test_a_deletion_seen_as_a_tombstone_changes_what_the_full_object_does,
    test_the_tombstone_of_an_earlier_object_of_that_name_changes_nothing,
) = tombstone_tests(outcome_of, KINDS)
