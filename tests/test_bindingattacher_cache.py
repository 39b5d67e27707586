"""Claim projections, the claim cache and the ledger index overlay (operators.bindingattacher.cache)."""

from __future__ import annotations

from typing import Any

from bindingattacher_builders import claim, record, result

from operators.bindingattacher.cache import (
    ClaimCache,
    ClaimKey,
    claim_key,
    has_binding_conditions,
    newer,
    project_claim,
    put_record,
    record_claim_key,
)
from operators.bindingattacher.ledger import LedgerIndex


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
    kept = project_claim(body, keep_test_annotations=True)
    assert kept.metadata.annotations == {"test.dra-operators.io/attach-delay": "8s"}
    assert kept.metadata.labels == {}
    assert project_claim(body, keep_test_annotations=False).metadata.annotations == {}


def test_cache_never_rolls_back_to_an_older_version() -> None:
    cache = ClaimCache()
    assert cache.put(project_claim(_body("7"), False))
    assert not cache.put(project_claim(_body("6"), False))
    current = cache.get("u1")
    assert current is not None
    assert current.metadata.resource_version == "7"
    assert cache.named("ns", "c") is current


def test_a_recreated_claim_of_the_same_name_replaces_the_name_index_only() -> None:
    cache = ClaimCache()
    cache.put(project_claim(_body("1", uid="old"), False))
    cache.put(project_claim(_body("2", uid="new"), False))
    cache.remove("old")
    found = cache.named("ns", "c")
    assert found is not None
    assert found.metadata.uid == "new"
    assert [c.metadata.uid for c in cache] == ["new"]


def test_binding_conditions_and_keys() -> None:
    the_claim = claim([result("f0")])
    assert has_binding_conditions(the_claim)
    assert not has_binding_conditions(claim([result("f0", ready=(), failure=())]))
    assert not has_binding_conditions(claim(allocated=False))
    assert claim_key(the_claim) == ClaimKey("team-a", "trainer-0-gpu", the_claim.metadata.uid)
    assert record_claim_key(record(the_claim)) == claim_key(the_claim)


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
