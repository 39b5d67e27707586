"""Deletions the watch never saw: after a 410 Gone re-list the informer hands each object that
vanished in the gap to the delete handler as a tombstone (kind, name, namespace, UID, no spec or
status). Deleting by tombstone must change what deleting by the full object changes, reading the
final state from the cache.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from devicetaint_builders import P1
from test_devicetaint_controller import (
    CLAIM,
    CLUSTER_1_37,
    P2,
    POD,
    TAINT,
    FakeClient,
    fixture_f,
    make_controller,
    paced_world,
    slice_body,
    start,
)

from operators.core.keys import Key
from operators.core.models import tombstone
from operators.core.reconcile import Done, Requeue
from operators.devicetaint.controller import DeviceTaintController
from operators.devicetaint.evaluation import PodEviction
from operators.devicetaint.models import DeviceTaintRule
from operators.devicetaint.podeviction import EVENT_CANCELLING_DELETION, EVENT_REASON
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

World = Callable[[], Awaitable[tuple[DeviceTaintController, FakeClient]]]
Delete = Callable[[DeviceTaintController, Mapping[str, Any]], None]

SELECTING_GPU_0 = {"driver": "dra.example.com", "pool": "node-1", "device": "gpu-0"}
RULE_BODY: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "example", "uid": "R1", "generation": 1},
    "spec": {"taint": TAINT, "deviceSelector": SELECTING_GPU_0},
}
POD_2: dict[str, Any] = {**POD, "metadata": {"name": "p2", "namespace": "ns1", "uid": "U2"}}
CANCELLED = (EVENT_REASON, EVENT_CANCELLING_DELETION)


@dataclass(frozen=True)
class Outcome:
    """What a deletion changed, as far as anything outside the cache can tell."""

    queued: list[Key]
    events: list[tuple[str, str]]
    cached: dict[str, int]
    scheduled: dict[Key, PodEviction | None]
    rule: DeviceTaintRule | None
    evicted_by_rule: int
    paced_pods: int


async def outcome_of(
    world: World, delete: Delete, body: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Outcome:
    controller, client = await world()
    controller.runtime.queue.open()
    await controller.runtime.events.drain(5)
    queued: list[Key] = []
    monkeypatch.setattr(controller.runtime.queue, "add_after", lambda key, _delay: queued.append(key))
    already_written = len(client.calls)
    delete(controller, body)
    await controller.runtime.events.drain(5)
    cache = controller.cache
    return Outcome(
        queued=queued,
        events=[(b["reason"], b["message"]) for m, _, b in client.calls[already_written:] if m == "POST"],
        cached=cache.cached_objects(),
        scheduled={item: cache.scheduled_eviction(item) for item in (P1, P2)},
        rule=cache.cached_rule("example"),
        evicted_by_rule=cache.evicted_count("R1"),
        paced_pods=controller.paced_pod_count(),
    )


async def both_ways(
    world: World, delete: Delete, body: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[Outcome, Outcome]:
    """The outcome of deleting by the full ``body``, then by its tombstone, each in a fresh ``world``."""
    return (
        await outcome_of(world, delete, body, monkeypatch),
        await outcome_of(world, delete, tombstone(body), monkeypatch),
    )


async def slice_tainted_world() -> tuple[DeviceTaintController, FakeClient]:
    """Fixture F with a NoExecute taint on the slice's gpu-0: p1's eviction is pending."""
    controller, client = make_controller(CLUSTER_1_37)
    assert await start(controller)
    fixture_f(controller, [TAINT])
    assert controller.cache.scheduled_eviction(P1) is not None
    return controller, client


async def rule_tainted_world() -> tuple[DeviceTaintController, FakeClient]:
    """p1 and p2 on gpu-0, which only the rule taints; p1 already evicted by it, p2 pending."""
    controller, client, _ = paced_world(None)
    controller.upsert_rule(RULE_BODY)
    assert await start(controller)
    assert await controller.sync(P1) == Done()
    assert controller.cache.evicted_count("R1") == 1
    return controller, client


async def paced_pod_world() -> tuple[DeviceTaintController, FakeClient]:
    """p1 and p2 on gpu-0 under a rule allowing one eviction a minute: p1 took the token, p2 waits."""
    controller, client, _ = paced_world({EVICTIONS_PER_MINUTE: "1"})
    assert await start(controller)
    assert await controller.sync(P1) == Done()
    assert isinstance(await controller.sync(P2), Requeue)
    assert controller.paced_pod_count() == 1
    return controller, client


async def test_a_rule_deleted_in_a_watch_gap_stops_evicting_and_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full, gap = await both_ways(rule_tainted_world, DeviceTaintController.delete_rule, RULE_BODY, monkeypatch)
    assert gap == full
    assert gap.rule is None
    assert gap.cached["devicetaintrules"] == 0
    assert gap.scheduled[P2] is None
    assert gap.events == [CANCELLED]
    assert gap.evicted_by_rule == 0, "the count goes with the rule"


@pytest.mark.parametrize(
    ("delete", "body", "cached_as"),
    [
        # A slice's taints go with it.
        (DeviceTaintController.delete_slice, slice_body([TAINT]), "resourceslices"),
        (DeviceTaintController.delete_claim, CLAIM, "resourceclaims"),
    ],
    ids=["slice", "claim"],
)
async def test_a_slice_or_claim_deleted_in_a_watch_gap_cancels_the_pods_eviction(
    delete: Delete, body: dict[str, Any], cached_as: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, gap = await both_ways(slice_tainted_world, delete, body, monkeypatch)
    assert gap == full
    assert gap.cached[cached_as] == 0
    assert gap.scheduled[P1] is None
    assert gap.events == [CANCELLED]


async def test_a_pod_deleted_in_a_watch_gap_is_forgotten_with_its_pacing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full, gap = await both_ways(paced_pod_world, DeviceTaintController.delete_pod, POD_2, monkeypatch)
    assert gap == full
    assert gap.cached["pods"] == 1, "p1, evicted but not yet seen terminating, stays"
    assert gap.scheduled[P2] is None
    assert gap.paced_pods == 0
    assert gap.events == [], "a deleted pod needs no 'Cancelling deletion'"


@pytest.mark.parametrize(
    ("delete", "body"),
    [
        (DeviceTaintController.delete_rule, RULE_BODY),
        (DeviceTaintController.delete_slice, slice_body([TAINT])),
        (DeviceTaintController.delete_claim, CLAIM),
        (DeviceTaintController.delete_pod, POD),
    ],
    ids=["rule", "slice", "claim", "pod"],
)
async def test_the_tombstone_of_an_earlier_object_of_that_name_changes_nothing(
    delete: Delete, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache holds the object's successor (another UID): what the tombstone names is gone already."""

    async def world() -> tuple[DeviceTaintController, FakeClient]:
        controller, client = await slice_tainted_world()
        controller.upsert_rule(RULE_BODY)
        return controller, client

    def nothing(_controller: DeviceTaintController, _body: Mapping[str, Any]) -> None:
        pass

    earlier = {**body, "metadata": {**body["metadata"], "uid": "EARLIER"}}
    untouched = await outcome_of(world, nothing, earlier, monkeypatch)
    assert await outcome_of(world, delete, tombstone(earlier), monkeypatch) == untouched
    assert untouched.rule is not None
    assert untouched.scheduled[P1] is not None
