"""The one rule of which slices describe a pool, and the shared ResourceSlice projection."""

from __future__ import annotations

from typing import Any

from operators.dra import pools
from operators.dra.slices import ResourceSlice, SliceDevice

Slice = ResourceSlice[SliceDevice]


def _slice(name: str, generation: int, *devices: str, driver: str = "d", pool: str = "p") -> Slice:
    body: dict[str, Any] = {
        "metadata": {"name": name, "uid": f"u-{name}", "labels": {"x": "y"}, "managedFields": [{}]},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 2},
            "devices": [{"name": device} for device in devices],
        },
    }
    return Slice.model_validate(body)


def test_only_the_newest_generation_counts_in_name_order() -> None:
    slices = [_slice("c", 2, "d0"), _slice("a", 1, "d1"), _slice("b", 2, "d2")]
    assert [s.metadata.name for s in pools.current_slices(slices)] == ["b", "c"]
    assert pools.current_slices([]) == []


def test_an_incomplete_newest_generation_still_hides_the_older_one() -> None:
    # One slice of two announced: the caller decides what an incomplete pool means.
    current = pools.current_slices(
        [_slice("old-0", 1, "d0"), _slice("old-1", 1, "d1"), _slice("new", 2, "d0")]
    )
    assert [s.metadata.name for s in current] == ["new"]
    assert current[0].spec.pool.resource_slice_count == 2


def test_pools_are_judged_separately() -> None:
    slices = [
        _slice("a", 5, "x", pool="p1"),
        _slice("b", 1, "y", pool="p2"),
        _slice("c", 1, "z", driver="other", pool="p1"),
    ]
    by_pool = pools.current_slices_by_pool(slices)
    assert {pool: [s.metadata.name for s in current] for pool, current in by_pool.items()} == {
        ("d", "p1"): ["a"],
        ("d", "p2"): ["b"],
        ("other", "p1"): ["c"],
    }


def test_a_pools_devices_are_those_of_its_newest_generation() -> None:
    old, new = _slice("a-old", 1, "d7"), _slice("b-new", 2, "d0")
    assert [(s.name, d.name) for s, d in pools.pool_devices([new, old])] == [("b-new", "d0")]
    # Deleting the newer slices makes the older generation visible again.
    assert [(s.name, d.name) for s, d in pools.pool_devices([old])] == [("a-old", "d7")]
    assert pools.pool_devices([]) == []


def test_a_name_listed_twice_is_one_device_unless_duplicates_are_asked_for() -> None:
    slices = [_slice("b", 1, "d0", "d2"), _slice("a", 1, "d1", "d0"), _slice("z", 0, "gone")]
    for order in (slices, list(reversed(slices))):
        found = pools.pool_devices(order)
        assert [(s.name, d.name) for s, d in found] == [("a", "d1"), ("a", "d0"), ("b", "d2")]
        # poolstatus counts spec.devices entries: every one of the current slices, in slice order.
        every = pools.pool_devices(order, duplicates=True)
        assert [(s.name, d.name) for s, d in every] == [("a", "d1"), ("a", "d0"), ("b", "d0"), ("b", "d2")]


def test_slices_are_grouped_by_pool_whatever_their_generation() -> None:
    slices = [_slice("a", 2, "x"), _slice("b", 1, "y", pool="p2"), _slice("c", 1, "z")]
    by_pool = pools.slices_by_pool(slices)
    assert {pool: [s.name for s in members] for pool, members in by_pool.items()} == {
        ("d", "p"): ["a", "c"],
        ("d", "p2"): ["b"],
    }


def test_a_device_listed_twice_comes_from_the_first_slice_by_name() -> None:
    visible = pools.visible_devices(
        [_slice("b", 1, "d0"), _slice("a", 1, "d0", "d1"), _slice("z", 0, "gone")]
    )
    assert {key: s.metadata.name for key, (s, _) in visible.items()} == {
        (("d", "p"), "d0"): "a",
        (("d", "p"), "d1"): "a",
    }
    assert pools.published_device(
        [_slice("b", 1, "d0"), _slice("a", 1, "d0", "d1")], "d", "p", "d0"
    ) == SliceDevice(name="d0")
    assert pools.published_device([_slice("z", 0, "gone"), _slice("y", 1, "d0")], "d", "p", "gone") is None


def test_the_slice_projection_keeps_only_what_is_read() -> None:
    resource_slice = _slice("s", 3, "d0")
    assert resource_slice.metadata.model_dump() == {"name": "s", "uid": "u-s", "generation": 0}
    assert resource_slice.spec.devices[0] == SliceDevice(name="d0")
    nulls = Slice.model_validate(
        {"metadata": {"name": "n"}, "spec": {"driver": "d", "pool": {"name": "p"}, "devices": None}}
    )
    assert nulls.spec.devices == ()
