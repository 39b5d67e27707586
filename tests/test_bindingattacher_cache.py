"""Claim projections, the claim cache and the ledger index overlay (operators.bindingattacher.cache),
and the status writer's live read, which keeps the cache honest about deleted claims."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from bindingattacher_builders import FABRIC, NIC, T0, Writes, claim, claim_body, entry, record, result

from operators.bindingattacher.cache import (
    ClaimCache,
    ClusterCache,
    claim_key,
    has_binding_conditions,
    newer,
    project_claim,
    put_record,
    record_claim_key,
)
from operators.bindingattacher.kube import StatusWriter
from operators.bindingattacher.ledger import LedgerIndex, identity_state
from operators.bindingattacher.statemachine import IdentityState
from operators.core.client import ApiError, KubeClient
from operators.core.events import EventRecorder
from operators.core.keys import CLAIM, Key


def _body(rv: str = "5", uid: str = "u1", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": uid, "resourceVersion": rv, **meta},
        "status": {},
    }


def test_newer_compares_integers_and_lets_opaque_versions_win() -> None:
    assert newer("10", "9")
    assert newer("9", "9")
    assert not newer("8", "9")
    assert newer("abc", "9")


def test_projection_keeps_only_test_annotations_and_only_when_enabled() -> None:
    body = _body(
        labels={"a": "b"},
        annotations={"test.dra-operators.io/attach-delay": "8s", "other": "x"},
    )
    kept = project_claim(body, keep_test_annotations=True, configured_drivers=[FABRIC])
    assert kept.metadata.annotations == {"test.dra-operators.io/attach-delay": "8s"}
    assert kept.metadata.labels == {}
    dropped = project_claim(body, keep_test_annotations=False, configured_drivers=[FABRIC])
    assert dropped.metadata.annotations == {}


def test_cache_never_rolls_back_to_an_older_version() -> None:
    cache = ClaimCache()
    assert cache.put(project_claim(_body("7"), False, [FABRIC]))
    assert not cache.put(project_claim(_body("6"), False, [FABRIC]))
    current = cache.get("u1")
    assert current is not None
    assert current.metadata.resource_version == "7"
    assert cache.named("ns", "c") is current


def test_a_recreated_claim_of_the_same_name_replaces_the_name_index_only() -> None:
    cache = ClaimCache()
    cache.put(project_claim(_body("1", uid="old"), False, [FABRIC]))
    cache.put(project_claim(_body("2", uid="new"), False, [FABRIC]))
    cache.remove("old")
    found = cache.named("ns", "c")
    assert found is not None
    assert found.metadata.uid == "new"
    assert [c.metadata.uid for c in cache] == ["new"]


def test_a_deleted_claim_is_not_brought_back_by_a_copy_read_before_its_deletion() -> None:
    cache = ClaimCache()
    cache.put(project_claim(_body("7"), False, [FABRIC]))
    cache.remove("u1")
    # A GET or an apply answer that was on its way when the DELETED event came.
    assert not cache.put(project_claim(_body("7"), False, [FABRIC]))
    assert not cache.put(project_claim(_body("8"), False, [FABRIC]))
    assert cache.get("u1") is None
    assert cache.named("ns", "c") is None
    assert cache.put(project_claim(_body("9", uid="u2"), False, [FABRIC])), (
        "a new claim of the same name is a new UID"
    )


class _Reader:
    """Answers the live GET of the claim with ``answer``: a body, or an ApiError to raise."""

    def __init__(self, answer: dict[str, Any] | ApiError) -> None:
        self.answer = answer

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    "answer",
    [ApiError(404, "NotFound", 'resourceclaims.resource.k8s.io "c" not found'), _body("9", uid="u2")],
    ids=["gone", "replaced"],
)
async def test_a_live_read_that_finds_the_claim_gone_makes_the_cache_forget_it(
    answer: dict[str, Any] | ApiError,
) -> None:
    caches = ClusterCache()
    cache = caches.claims
    cache.put(project_claim(_body("7"), False, [FABRIC]))
    client = cast(KubeClient, _Reader(answer))
    writes = Writes(client, cast(EventRecorder, None))
    writer = StatusWriter(writes, client, caches, keep_test_annotations=False)
    assert await writer.read("ns", "c", "u1") is None
    assert cache.get("u1") is None
    assert not cache.put(project_claim(_body("7"), False, [FABRIC]))


def test_a_claim_that_can_never_be_attached_keeps_no_allocation_details() -> None:
    plain = [result("f0", ready=(), failure=()), result("n0", driver=NIC, ready=(), failure=())]
    shown = [entry("n0", [], driver=NIC) | {"data": {"blob": "x" * 10000}}]
    kept = project_claim(
        claim_body(plain, devices=shown, reserved=("pod-uid-1", "pod-uid-2")), False, [FABRIC, NIC]
    )
    allocation = kept.status.allocation
    assert allocation is not None
    assert allocation.allocation_timestamp == T0, "a later record of the claim compares it"
    assert (allocation.devices.results, allocation.node_selector) == ((), None)
    assert (kept.status.devices, kept.status.reserved_for) == ((), ())
    # Its records (of an earlier allocation) see a re-allocation, not a deallocation.
    earlier = record(claim([result("f0")], timestamp=T0 - timedelta(minutes=5)))
    assert identity_state(earlier, kept) is IdentityState.REALLOCATED
    attachable = claim_body([result("f0"), *plain], devices=shown)
    assert project_claim(attachable, False, [FABRIC, NIC]) == claim([result("f0"), *plain], devices=shown)


def test_binding_conditions_and_keys() -> None:
    the_claim = claim([result("f0")])
    assert has_binding_conditions(the_claim)
    assert not has_binding_conditions(claim([result("f0", ready=(), failure=())]))
    assert not has_binding_conditions(claim(allocated=False))
    uid = the_claim.metadata.uid
    assert record_claim_key(record(the_claim)) == Key(CLAIM, "team-a", "trainer-0-gpu", uid)
    assert claim_key(the_claim) == record_claim_key(record(the_claim))


def test_a_drivers_keys_are_its_allocated_claims_and_the_claims_of_its_records() -> None:
    cache = ClusterCache()
    allocated = claim([result("f0")], uid="allocated")
    other_driver = claim([result("g0", driver="gpu.example.com")], uid="other-driver")
    gone = claim([result("f1")], uid="gone")  # not cached any more: only its record is
    for cached in (allocated, other_driver):
        assert cache.claims.put(cached)
    cache.records.put(record(gone, device="f1"))
    assert list(cache.driver_keys(FABRIC)) == [claim_key(allocated), claim_key(gone)]
    assert list(cache.driver_keys("gpu.example.com")) == [claim_key(other_driver)]
    assert list(cache.driver_keys("none.example.com")) == []


def test_put_record_keeps_the_newer_version() -> None:
    index = LedgerIndex()
    base = record()
    newer_one = base.model_copy(
        update={"metadata": base.metadata.model_copy(update={"resource_version": "9"})}
    )
    older = base.model_copy(update={"metadata": base.metadata.model_copy(update={"resource_version": "3"})})
    assert put_record(index, newer_one)
    assert not put_record(index, older)
    stored = index.get(base.metadata.name)
    assert stored is not None
    assert stored.metadata.resource_version == "9"
