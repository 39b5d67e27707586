"""Compatibility groups in partitionSummary: spec vectors 52-59 (section 19.6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from poolstatus_builders import A, claims_on, device, only_pool, partitions, resource_slice

from operators.poolstatus.compatibility import BLOCKED, EMPTY, NOGROUP, groups_state
from operators.poolstatus.models import ResourceSlice


def member(
    name: str,
    profile: str,
    groups: Sequence[str] = (),
    counter_set: str = "gpu-0-memory",
    memory: str = "4Gi",
) -> dict[str, Any]:
    consumption = (counter_set, {"memory": memory}, groups) if groups else (counter_set, {"memory": memory})
    return device(name, attributes={"profile": profile}, consumes=[consumption])


def pool_of(
    devices: Sequence[dict[str, Any]], shared: Mapping[str, Mapping[str, str]]
) -> list[ResourceSlice]:
    return [
        resource_slice("counters", slice_count=2, shared_counters=shared),
        resource_slice("devices", devices, slice_count=2, partition_attribute=A),
    ]


def fixture_cg(
    *extra: dict[str, Any], shared: Mapping[str, Mapping[str, str]] | None = None
) -> list[ResourceSlice]:
    devices = [
        member("mig-0", "MIG", ["mig"]),
        member("mig-1", "MIG", ["mig"]),
        member("vgpu-0", "VGPU", ["vgpu"]),
        member("vgpu-1", "VGPU", ["vgpu"]),
        *extra,
    ]
    return pool_of(devices, shared or {"gpu-0-memory": {"memory": "8Gi"}})


def test_v52_nothing_in_use() -> None:
    assert partitions(only_pool(fixture_cg())) == [(A, "MIG", 2, 2), (A, "VGPU", 2, 2)]


def test_v53_in_use_group_excludes_other_group() -> None:
    assert partitions(only_pool(fixture_cg(), claims_on("mig-0"))) == [(A, "MIG", 2, 1), (A, "VGPU", 2, 0)]


def test_v54_no_group_device_in_use() -> None:
    slices = fixture_cg(member("plain-0", "Plain"), member("plain-1", "Plain"))
    assert partitions(only_pool(slices, claims_on("plain-0"))) == [
        (A, "MIG", 2, 0),
        (A, "Plain", 2, 1),
        (A, "VGPU", 2, 0),
    ]


def test_v55_intersection_narrows() -> None:
    devices = [
        member("a-0", "A1", ["foo", "foobar"]),
        member("b-0", "B1", ["bar", "foobar"]),
        member("c-0", "C1", ["baz"]),
        member("d-0", "D1", ["qux", "foobar"]),
    ]
    pool = only_pool(pool_of(devices, {"gpu-0-memory": {"memory": "16Gi"}}), claims_on("a-0"))
    assert partitions(pool) == [(A, "A1", 1, 0), (A, "B1", 1, 1), (A, "C1", 1, 0), (A, "D1", 1, 1)]


def test_v56_counter_sets_are_independent() -> None:
    shared = {"gpu-0-memory": {"memory": "8Gi"}, "gpu-1-memory": {"memory": "8Gi"}}
    slices = fixture_cg(member("vgpu-2", "VGPU", ["vgpu"], counter_set="gpu-1-memory"), shared=shared)
    assert partitions(only_pool(slices, claims_on("mig-0"))) == [(A, "MIG", 2, 1), (A, "VGPU", 3, 1)]


def test_v57_admission_needed_on_every_set() -> None:
    def two_sets(name: str, profile: str, first: str, second: str | None) -> dict[str, Any]:
        consumes: list[Any] = [("s1", {"c": "4"}, [first])]
        if second is not None:
            consumes.append(("s2", {"c": "4"}, [second]))
        return device(name, attributes={"profile": profile}, consumes=consumes)

    devices = [
        two_sets("x-0", "X", "g1", None),
        two_sets("y-0", "Y", "g1", "g2"),
        two_sets("z-0", "Z", "g2", "g2"),
    ]
    pool = only_pool(pool_of(devices, {"s1": {"c": "8"}, "s2": {"c": "8"}}), claims_on("x-0"))
    assert partitions(pool) == [(A, "X", 1, 0), (A, "Y", 1, 1), (A, "Z", 1, 0)]


def test_v58_contradicting_allocations_block_the_set() -> None:
    devices = [
        member("u-0", "U", ["a"]),
        member("u-1", "U"),
        member("v-0", "V", ["a"]),
        member("w-0", "W"),
    ]
    expected = [(A, "U", 2, 0), (A, "V", 1, 0), (A, "W", 1, 0)]
    shared = {"gpu-0-memory": {"memory": "16Gi"}}
    assert partitions(only_pool(pool_of(devices, shared), claims_on("u-0", "u-1"))) == expected
    # Whatever the order: put the no-group device first in canonical order.
    devices[1] = member("t-1", "U")
    assert partitions(only_pool(pool_of(devices, shared), claims_on("u-0", "t-1"))) == expected


def test_v59_admission_function() -> None:
    assert EMPTY.admits([])
    assert EMPTY.admits(["mig"])
    assert NOGROUP.admits([])
    assert NOGROUP.admits(None)
    assert not NOGROUP.admits(["mig"])
    assert not groups_state(["mig"]).admits([])
    assert groups_state(["mig"]).admits(["mig"])
    assert not groups_state(["mig"]).admits(["vgpu"])

    narrowed = groups_state(["foo", "foobar"])
    assert narrowed.admits(["bar", "foobar"])
    narrowed = narrowed.fold(["bar", "foobar"])
    assert narrowed == groups_state(["foobar"])
    assert not narrowed.admits(["baz"])
    assert narrowed.admits(["qux", "foobar"])

    stacked = EMPTY.fold([]).fold([]).fold([])
    assert stacked == NOGROUP
    assert not stacked.admits(["mig"])


def test_folding_a_rejected_device_blocks() -> None:
    assert NOGROUP.fold(["a"]) == BLOCKED
    assert groups_state(["a"]).fold([]) == BLOCKED
    assert groups_state(["a"]).fold(["b"]) == BLOCKED
    assert BLOCKED.fold([]).blocked
    assert not BLOCKED.admits([])
