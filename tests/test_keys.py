"""The one work-queue key (operators.core.keys)."""

from __future__ import annotations

import dataclasses

import pytest

from operators.core.keys import CLAIM, PERIODIC, POD, Key


def test_keys_are_equal_and_hash_alike_by_value() -> None:
    assert Key(POD, "ns", "p") == Key(POD, "ns", "p")
    assert hash(Key(POD, "ns", "p")) == hash(Key(POD, "ns", "p"))
    assert len({Key(POD, "ns", "p"), Key(POD, "ns", "p"), Key(CLAIM, "ns", "p")}) == 2


def test_the_kind_and_the_uid_are_part_of_the_identity() -> None:
    assert Key(POD, "ns", "x") != Key(CLAIM, "ns", "x")
    assert Key(CLAIM, "ns", "c", "uid-1") != Key(CLAIM, "ns", "c", "uid-2")
    assert Key(CLAIM, "ns", "c") == Key(CLAIM, "ns", "c", "")


def test_keys_are_immutable_and_slotted() -> None:
    key = Key(POD, "ns", "p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.name = "q"  # type: ignore[misc]
    assert not hasattr(key, "__dict__")


def test_periodic_keys_name_work_no_object_names() -> None:
    assert Key.periodic("ttl") == Key(PERIODIC, "", "ttl")
    assert Key.periodic("ttl") != Key.periodic("discovery")


def test_keys_order_by_kind_then_namespace_then_name() -> None:
    keys = [Key(POD, "b", "a"), Key(CLAIM, "b", "b"), Key(CLAIM, "a", "z")]
    assert sorted(keys) == [Key(CLAIM, "a", "z"), Key(CLAIM, "b", "b"), Key(POD, "b", "a")]


def test_a_key_reads_as_its_kind_and_object() -> None:
    assert str(Key(CLAIM, "team-a", "gpu")) == "claim team-a/gpu"
    assert str(Key("rule", "", "evict-gpu", "uid-1")) == "rule evict-gpu"
    assert str(Key.periodic("sweep")) == "periodic sweep"
