"""The taint-selector cache: which selectors each watch event concerns."""

from __future__ import annotations

from typing import Any

import pytest

from operators.core.models import UnparsableObject
from operators.taintselector.cache import ClusterCache
from operators.taintselector.models import DeviceId
from operators.taintselector.rules import rule_name


def _selector(name: str, uid: str, device_class: str | None = None) -> dict[str, Any]:
    chosen: dict[str, Any] = {"driver": "gpu.example.com"}
    if device_class is not None:
        chosen = {"deviceClassName": device_class}
    return {
        "metadata": {"name": name, "uid": uid, "generation": 1},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}, "deviceSelector": chosen},
    }


def _slice(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "p", "generation": 1},
            "devices": [{"name": "d"}],
        },
    }


def _rule(name: str, owner_uid: str | None) -> dict[str, Any]:
    owners = (
        []
        if owner_uid is None
        else [{"apiVersion": "a/v1", "kind": "K", "name": "x", "uid": owner_uid, "controller": True}]
    )
    return {
        "metadata": {"name": name, "uid": f"rule-{name}", "ownerReferences": owners},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }


@pytest.fixture
def cache() -> ClusterCache:
    cache = ClusterCache()
    cache.upsert_owner(_selector("a", "uid-a"))
    cache.upsert_owner(_selector("b", "uid-b", device_class="gpus"))
    return cache


def test_slices_concern_every_selector(cache: ClusterCache) -> None:
    assert cache.upsert_slice(_slice("s1")) == ["a", "b"]
    assert "s1" in cache.slices
    assert cache.delete_slice(_slice("s1")) == ["a", "b"]
    assert cache.slices == {}


def test_classes_concern_the_selectors_naming_them(cache: ClusterCache) -> None:
    body = {"metadata": {"name": "gpus"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    assert cache.upsert_class(body) == ["b"]
    assert cache.upsert_class({"metadata": {"name": "other"}}) == []
    assert cache.delete_class(body) == ["b"]
    assert "gpus" not in cache.classes


def test_rules_concern_their_owner_and_the_selector_that_may_want_their_name(cache: ClusterCache) -> None:
    assert cache.upsert_rule(_rule("x-1", "uid-a")) == ["a"]
    # Owned by a deleted selector "b" of old, but named like b's rules: b may be waiting for it.
    assert cache.upsert_rule(_rule(rule_name("b", DeviceId("d", "p", "x")), "uid-old")) == ["b"]
    assert cache.delete_rule(_rule("x-1", None)) == ["a"]
    assert cache.upsert_rule(_rule("unrelated", None)) == []


def test_long_selector_names_match_their_truncated_rule_names() -> None:
    cache = ClusterCache()
    long_name = "n" * 250
    cache.upsert_owner(_selector(long_name, "uid-long"))
    assert cache.delete_rule(_rule(rule_name(long_name, DeviceId("d", "p", "x")), None)) == [long_name]


def test_rules_of_lists_owned_rules_and_namesakes(cache: ClusterCache) -> None:
    cache.upsert_rule(_rule("mine", "uid-a"))
    cache.upsert_rule(_rule("wanted", "uid-other"))
    cache.upsert_rule(_rule("foreign", "uid-other"))
    assert sorted(r.metadata.name for r in cache.rules_of("uid-a", ["wanted"])) == ["mine", "wanted"]


def test_unparsable_updates_are_reported_and_change_nothing(cache: ClusterCache) -> None:
    # The controller makes each the object's deletion (test_taintselector_unreadable), which reads
    # what is kept here.
    cache.upsert_slice(_slice("s1"))
    with pytest.raises(UnparsableObject, match="spec"):
        cache.upsert_slice({"metadata": {"name": "s1"}, "spec": {"pool": {}}})
    assert "s1" in cache.slices
    with pytest.raises(UnparsableObject):
        cache.upsert_owner({"metadata": {"name": "a"}, "spec": {"taint": "nope"}})
    assert "a" in cache.selectors
    assert cache.delete_owner({"metadata": {"name": "b"}}) == []
