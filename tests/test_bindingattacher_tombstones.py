"""Deletions the binding attacher sees only as tombstones: after a 410 Gone re-list (or for its own
policies and records, a re-list at start) an object that vanished in the gap reaches its delete
handler with its kind, name, namespace and UID only. Deleting by tombstone must change what
deleting by the full object changes, and the tombstone of an earlier object of that name must
change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from bindingattacher_builders import CLAIM_UID, T0, attacher, claim, claim_body, record, record_body, result
from test_bindingattacher_pipeline import POLICY, ClusterServer

from operators.bindingattacher.cache import POLICY as POLICY_KIND
from operators.bindingattacher.cache import record_claim_key
from operators.bindingattacher.controller import BindingAttacherController
from operators.bindingattacher.models import DeviceAttachmentStatus, Phase
from operators.core.keys import Key
from operators.core.models import tombstone
from operators.core.namespace import Presence

Delete = Callable[[BindingAttacherController, Mapping[str, Any]], None]

CLAIM = claim_body([result("f0")])
HOLDER = record(claim([result("f0")]), status=DeviceAttachmentStatus(phase=Phase.ATTACHED))
# Another claim's record of the same device, waiting for the holder to let go of it.
WAITER = record(
    claim([result("f0")], uid="6c1d3e2f-0000-4000-8000-000000000002", timestamp=T0 + timedelta(seconds=5)),
    status=DeviceAttachmentStatus(phase=Phase.PENDING),
)
HOLDER_BODY = record_body(HOLDER, uid="uid-holder")
WAITER_BODY = record_body(WAITER, uid="uid-waiter")


@dataclass(frozen=True)
class Outcome:
    """What a deletion changed: what it queued, what the cache keeps, which actions it closed."""

    queued: list[Key]
    claims: list[str]
    records: list[str]
    policies: list[str]
    closed: list[str]


async def cluster(monkeypatch: pytest.MonkeyPatch) -> tuple[BindingAttacherController, Outcome]:
    """An evaluated policy (its action built), a claim of its driver, the claim's record holding
    device f0 and another claim's record waiting for it; the returned Outcome starts empty and
    fills with what follows."""
    controller = attacher(ClusterServer(CLAIM), Presence.PRESENT)
    controller.upsert_policy(POLICY)
    await controller.sync(Key(POLICY_KIND, "", "fabric"))
    controller.upsert_claim(CLAIM)
    controller.upsert_record(HOLDER_BODY)
    controller.upsert_record(WAITER_BODY)
    state = controller.shared.cache.policies.get("fabric")
    assert state is not None
    assert state.action is not None
    seen = Outcome(queued=[], claims=[], records=[], policies=[], closed=[])

    def spawned(coroutine: Coroutine[Any, Any, Any], name: str) -> None:
        coroutine.close()
        seen.closed.append(name)

    monkeypatch.setattr(controller.shared.queue, "add", seen.queued.append)
    monkeypatch.setattr(controller.shared.queue, "add_after", lambda key, _delay: seen.queued.append(key))
    monkeypatch.setattr(controller.runtime, "spawn", spawned)
    return controller, seen


async def outcome_of(delete: Delete, body: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch) -> Outcome:
    controller, seen = await cluster(monkeypatch)
    delete(controller, body)
    cache = controller.shared.cache
    return Outcome(
        queued=seen.queued,
        claims=sorted(c.metadata.uid for c in cache.claims),
        records=sorted(r.metadata.name for r in cache.records.all()),
        policies=sorted(s.name for s in cache.policies.all()),
        closed=seen.closed,
    )


async def both_ways(
    delete: Delete, body: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[Outcome, Outcome]:
    """The outcome of deleting by the full ``body``, then by its tombstone, each in a fresh cluster."""
    return (
        await outcome_of(delete, body, monkeypatch),
        await outcome_of(delete, tombstone(body), monkeypatch),
    )


async def test_a_record_deleted_in_a_watch_gap_is_forgotten_and_wakes_its_waiters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full, gap = await both_ways(BindingAttacherController.delete_record, HOLDER_BODY, monkeypatch)
    assert gap == full
    assert gap.records == [WAITER.metadata.name]
    assert gap.queued == [record_claim_key(HOLDER), Key(POLICY_KIND, "", "fabric"), record_claim_key(WAITER)]


@pytest.mark.parametrize(
    ("delete", "body", "claims_left", "policies_left", "closed"),
    [
        (BindingAttacherController.delete_claim, CLAIM, [], ["fabric"], []),
        (BindingAttacherController.delete_policy, POLICY, [CLAIM_UID], [], ["close-action-fabric"]),
    ],
    ids=["claim", "policy"],
)
async def test_a_deletion_seen_as_a_tombstone_changes_what_the_full_object_does(
    delete: Delete,
    body: dict[str, Any],
    claims_left: list[str],
    policies_left: list[str],
    closed: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full, gap = await both_ways(delete, body, monkeypatch)
    assert gap == full
    assert (gap.claims, gap.policies, gap.closed) == (claims_left, policies_left, closed)
    assert record_claim_key(HOLDER) in gap.queued, "the claim with a record is looked at again"


@pytest.mark.parametrize(
    ("delete", "body"),
    [
        (BindingAttacherController.delete_claim, CLAIM),
        (BindingAttacherController.delete_policy, POLICY),
        (BindingAttacherController.delete_record, HOLDER_BODY),
    ],
    ids=["claim", "policy", "record"],
)
async def test_the_tombstone_of_an_earlier_object_of_that_name_changes_nothing(
    delete: Delete, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache holds the object's successor (another UID), listed before the re-list hands over
    its predecessor's tombstone: a recreated policy keeps its action, a recreated record its place."""

    def nothing(_controller: BindingAttacherController, _body: Mapping[str, Any]) -> None:
        pass

    earlier = {**body, "metadata": {**body["metadata"], "uid": "uid-earlier"}}
    untouched = await outcome_of(nothing, earlier, monkeypatch)
    assert await outcome_of(delete, tombstone(earlier), monkeypatch) == untouched
    assert untouched.queued == []
    assert untouched.closed == []
