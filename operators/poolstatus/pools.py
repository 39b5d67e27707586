"""Grouping ResourceSlices into pools and deciding whether each pool is complete.

A pool is the set of slices sharing (driver, pool name). During a rollout a pool briefly
holds slices of several generations; only the newest generation describes the pool, and
older slices are ignored without complaint (spec section 7.3).

Determinism (decision D8) starts here: slices are sorted by name, devices are put in
*canonical order* (device name, then slice name), and the expected slice count is the
maximum any current slice announces, so the result never depends on the order in which
the cache delivered the slices, and a pool is never declared complete too early.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from operators.dra.pools import current_slices, pool_devices
from operators.dra.quantity import Quantity

from .models import Device, ResourceSlice

CounterValues = Mapping[str, Mapping[str, Quantity]]
"""Counter set name -> counter name -> value."""


@dataclass(frozen=True)
class PublishedDevice:
    """One ``spec.devices[]`` entry of a current slice, with what it inherits from the slice."""

    slice_name: str
    slice_partition_attribute: str | None
    device: Device

    @property
    def name(self) -> str:
        return self.device.name


@dataclass(frozen=True)
class Pool:
    driver: str
    name: str
    generation: int
    slice_count: int
    expected_slice_count: int
    node_name: str | None
    devices: tuple[PublishedDevice, ...]
    """Canonical order: device name, then slice name."""
    shared_counters: CounterValues

    @property
    def complete(self) -> bool:
        # More slices than announced is accepted as complete, as upstream does.
        return self.slice_count >= self.expected_slice_count

    @property
    def device_names(self) -> frozenset[str]:
        return frozenset(d.name for d in self.devices)


def matching_slices(
    slices: Iterable[ResourceSlice], driver: str, pool_name: str | None
) -> dict[str, list[ResourceSlice]]:
    """Candidate slices grouped by pool name. Matching is exact and case-sensitive."""
    by_pool: dict[str, list[ResourceSlice]] = defaultdict(list)
    for resource_slice in slices:
        spec = resource_slice.spec
        if spec.driver != driver:
            continue
        if pool_name is not None and spec.pool.name != pool_name:
            continue
        by_pool[spec.pool.name].append(resource_slice)
    return by_pool


def build_pool(driver: str, pool_name: str, slices: Iterable[ResourceSlice]) -> Pool:
    """Describe one pool from all of its slices (at least one), whatever their generation."""
    current = current_slices(slices)
    generation = current[0].spec.pool.generation

    node_names = {s.spec.node_name or "" for s in current}
    node_name = node_names.pop() if len(node_names) == 1 else None

    # Every entry, a name listed twice too: totalDevices counts the entries of the current slices.
    partition_attribute = {s.metadata.name: s.spec.partition_type_attribute or None for s in current}
    devices = [
        PublishedDevice(s.metadata.name, partition_attribute[s.metadata.name], device)
        for s, device in pool_devices(current, duplicates=True)
    ]
    devices.sort(key=lambda d: (d.name, d.slice_name))

    shared: dict[str, Mapping[str, Quantity]] = {}
    for s in current:  # sorted by slice name, so the first slice wins a duplicate set name
        for counter_set in s.spec.shared_counters or ():
            if counter_set.name not in shared:
                shared[counter_set.name] = {name: c.value for name, c in counter_set.counters.items()}

    return Pool(
        driver=driver,
        name=pool_name,
        generation=generation,
        slice_count=len(current),
        expected_slice_count=max(s.spec.pool.resource_slice_count for s in current),
        node_name=node_name or None,
        devices=tuple(devices),
        shared_counters=shared,
    )


def group_pools(slices: Iterable[ResourceSlice], driver: str, pool_name: str | None) -> list[Pool]:
    """Every pool of ``driver`` (optionally only ``pool_name``), sorted by pool name."""
    by_pool = matching_slices(slices, driver, pool_name)
    return [build_pool(driver, name, by_pool[name]) for name in sorted(by_pool)]
