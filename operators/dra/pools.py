"""Which slices describe a pool: only those of its highest ``spec.pool.generation``.

A driver republishes a pool by writing slices with a higher generation; slices of older
generations linger until it deletes them and must be ignored, even when they are the only ones
that still list some device (as upstream's allocator and eviction controller do). Deleting the
newest slices makes the older generation visible again.

Slices are taken in name order, so that a device listed twice resolves to the same slice however
the slices arrived. Whether a pool is complete (as many current slices as announced) is left to
the caller: devicetaint, taintselector, bindingattacher and kubectl dra act on an incomplete
pool's current slices, poolstatus reports the pool as incomplete.

:func:`pool_devices` is the one answer to "which devices does this pool publish"; every operator
reads a pool's devices through it (or :func:`visible_devices`, its form over many pools).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeVar

from .slices import ResourceSlice, SliceDevice

Slice = TypeVar("Slice", bound=ResourceSlice[Any])
Device = TypeVar("Device", bound=SliceDevice)


PoolId = tuple[str, str]
"""(driver, pool name)"""


class DeviceId(NamedTuple):
    """A published device; sorting these orders by driver, then pool, then device name."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def pool_of(resource_slice: ResourceSlice[Any]) -> PoolId:
    return (resource_slice.spec.driver, resource_slice.spec.pool.name)


def current_slices(slices: Iterable[Slice]) -> list[Slice]:
    """Of one pool's slices, those of its highest generation, by name."""
    ordered = sorted(slices, key=lambda s: s.metadata.name)
    if not ordered:
        return []
    generation = max(s.spec.pool.generation for s in ordered)
    return [s for s in ordered if s.spec.pool.generation == generation]


def slices_by_pool(slices: Iterable[Slice]) -> dict[PoolId, list[Slice]]:
    """Every pool's slices, of whatever generation, in the order given."""
    by_pool: dict[PoolId, list[Slice]] = defaultdict(list)
    for resource_slice in slices:
        by_pool[pool_of(resource_slice)].append(resource_slice)
    return dict(by_pool)


def current_slices_by_pool(slices: Iterable[Slice]) -> dict[PoolId, list[Slice]]:
    """Every pool's current slices, by name."""
    return {pool: current_slices(members) for pool, members in slices_by_pool(slices).items()}


def pool_devices(
    slices: Iterable[ResourceSlice[Device]], *, duplicates: bool = False
) -> list[tuple[ResourceSlice[Device], Device]]:
    """The devices one pool publishes, from its slices of any generation: (slice, device) for each
    ``spec.devices`` entry of its current slices, slices by name and entries in their order.

    A device name listed twice (upstream's allocator refuses such a pool as invalid) is taken once,
    from the first slice by name, unless ``duplicates``. The two differ on purpose: the controllers
    that look a device up by name (its taints, its attributes, the device an action is handed) need
    one answer per name, while poolstatus counts ``spec.devices`` entries, as upstream's pool status
    does (``totalDevices`` is the entries of the current slices), and so keeps every entry.
    """
    found: list[tuple[ResourceSlice[Device], Device]] = []
    seen: set[str] = set()
    for resource_slice in current_slices(slices):
        for device in resource_slice.spec.devices:
            if not duplicates:
                if device.name in seen:
                    continue
                seen.add(device.name)
            found.append((resource_slice, device))
    return found


def visible_devices(
    slices: Iterable[ResourceSlice[Device]],
) -> dict[tuple[PoolId, str], tuple[ResourceSlice[Device], Device]]:
    """(pool, device name) -> (slice, device) for the devices of every pool (:func:`pool_devices`)."""
    return {
        (pool, device.name): (resource_slice, device)
        for pool, members in slices_by_pool(slices).items()
        for resource_slice, device in pool_devices(members)
    }


def published_device(
    slices: Iterable[ResourceSlice[Device]], driver: str, pool: str, device: str
) -> Device | None:
    """The device as its pool's current slices publish it, or None when they do not."""
    found = visible_devices(slices).get(((driver, pool), device))
    return found[1] if found is not None else None
