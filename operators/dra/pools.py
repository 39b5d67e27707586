"""Which slices describe a pool: only those of its highest ``spec.pool.generation``.

A driver republishes a pool by writing slices with a higher generation; slices of older
generations linger until it deletes them and must be ignored, even when they are the only ones
that still list some device (as upstream's allocator and eviction controller do). Deleting the
newest slices makes the older generation visible again.

Slices are taken in name order, so that a device listed twice resolves to the same slice however
the slices arrived. Whether a pool is complete (as many current slices as announced) is left to
the caller: devicetaint and taintselector act on an incomplete pool's current slices, poolstatus
reports the pool as incomplete.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

from .slices import ResourceSlice, SliceDevice

Slice = TypeVar("Slice", bound=ResourceSlice[Any])
Device = TypeVar("Device", bound=SliceDevice)


PoolId = tuple[str, str]
"""(driver, pool name)"""


def pool_of(resource_slice: ResourceSlice[Any]) -> PoolId:
    return (resource_slice.spec.driver, resource_slice.spec.pool.name)


def current_slices(slices: Iterable[Slice]) -> list[Slice]:
    """Of one pool's slices, those of its highest generation, by name."""
    ordered = sorted(slices, key=lambda s: s.metadata.name)
    if not ordered:
        return []
    generation = max(s.spec.pool.generation for s in ordered)
    return [s for s in ordered if s.spec.pool.generation == generation]


def current_slices_by_pool(slices: Iterable[Slice]) -> dict[PoolId, list[Slice]]:
    """Every pool's current slices, by name."""
    by_pool: dict[PoolId, list[Slice]] = defaultdict(list)
    for resource_slice in slices:
        by_pool[pool_of(resource_slice)].append(resource_slice)
    return {pool: current_slices(members) for pool, members in by_pool.items()}


def visible_devices(
    slices: Iterable[ResourceSlice[Device]],
) -> dict[tuple[PoolId, str], tuple[ResourceSlice[Device], Device]]:
    """(pool, device name) -> (slice, device) for every device of a current slice; a device listed
    twice comes from the first slice by name."""
    visible: dict[tuple[PoolId, str], tuple[ResourceSlice[Device], Device]] = {}
    for pool, current in current_slices_by_pool(slices).items():
        for resource_slice in current:
            for device in resource_slice.spec.devices:
                visible.setdefault((pool, device.name), (resource_slice, device))
    return visible


def published_device(
    slices: Iterable[ResourceSlice[Device]], driver: str, pool: str, device: str
) -> Device | None:
    """The device as its pool's current slices publish it, or None when they do not."""
    found = visible_devices(slices).get(((driver, pool), device))
    return found[1] if found is not None else None
