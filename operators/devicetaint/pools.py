"""ResourceSlices grouped into pools, of which only the newest generation is visible.

A driver republishes a pool by writing slices with a higher ``spec.pool.generation``; slices of older
generations linger until it deletes them, and must then be ignored, even when they are the only ones
that still list some device (spec §5). Deleting the newest slices makes the older generation visible
again.

:meth:`PoolIndex.apply` and :meth:`PoolIndex.delete` return, per pool touched, the devices whose set of
``NoExecute`` taints changed, so that only the claims using those devices need recomputing.
"""

from __future__ import annotations

from collections.abc import Iterator

from operators.dra import pools
from operators.dra.pools import PoolId, pool_of
from operators.dra.slices import SliceDevice
from operators.dra.taints import EFFECT_NO_EXECUTE, DeviceTaint

from .models import ResourceSlice


class Pool:
    """The slices of one pool; device lookups go through an index of the visible devices."""

    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self._visible: dict[str, tuple[ResourceSlice, SliceDevice]] | None = None
        # The slices that list a device with a NoExecute taint, whatever their generation.
        self.tainted: set[str] = set()

    def put(self, resource_slice: ResourceSlice) -> None:
        name = resource_slice.metadata.name
        self.slices[name] = resource_slice
        self._visible = None
        if _has_no_execute(resource_slice):
            self.tainted.add(name)
        else:
            self.tainted.discard(name)

    def remove(self, slice_name: str) -> None:
        del self.slices[slice_name]
        self._visible = None
        self.tainted.discard(slice_name)

    def visible_devices(self) -> dict[str, tuple[ResourceSlice, SliceDevice]]:
        """Device name -> (slice, device) for the newest generation; the first slice by name wins."""
        if self._visible is None:
            self._visible = {d.name: (s, d) for s, d in pools.pool_devices(self.slices.values())}
        return self._visible

    def device(self, name: str) -> tuple[ResourceSlice, SliceDevice] | None:
        return self.visible_devices().get(name)

    def no_execute_taints(self) -> dict[str, tuple[DeviceTaint, ...]]:
        """Device name -> its NoExecute taints, for every visible device that has one."""
        result: dict[str, tuple[DeviceTaint, ...]] = {}
        for name, (_, device) in self.visible_devices().items():
            taints = tuple(t for t in device.taints if t.effect == EFFECT_NO_EXECUTE)
            if taints:
                result[name] = taints
        return result


class PoolIndex:
    """All pools, plus where each slice lives (a slice may move to another pool on update)."""

    def __init__(self) -> None:
        self._pools: dict[PoolId, Pool] = {}
        self._pool_of_slice: dict[str, PoolId] = {}

    def get(self, pool_id: PoolId) -> Pool | None:
        return self._pools.get(pool_id)

    def items(self) -> Iterator[tuple[PoolId, Pool]]:
        yield from self._pools.items()

    def slice_count(self) -> int:
        return len(self._pool_of_slice)

    def slice_named(self, name: str) -> ResourceSlice | None:
        pool_id = self._pool_of_slice.get(name)
        return self._pools[pool_id].slices[name] if pool_id is not None else None

    def apply(self, resource_slice: ResourceSlice) -> dict[PoolId, set[str]]:
        """Add or replace a slice; returns the devices whose NoExecute taints changed, by pool."""
        name = resource_slice.metadata.name
        changes: dict[PoolId, set[str]] = {}
        old_pool_id = self._pool_of_slice.get(name)
        new_pool_id = pool_of(resource_slice)
        if old_pool_id is not None and old_pool_id != new_pool_id:
            changes.update(self._remove(name, old_pool_id))
        pool = self._pools.setdefault(new_pool_id, Pool())
        # Without a NoExecute taint in the pool before or after, no device's taints can change: the
        # common case, and comparing every visible device on each of a large pool's slice events
        # made a pool of 1000 slices cost minutes of CPU with the event loop blocked.
        before = pool.no_execute_taints() if pool.tainted else {}
        pool.put(resource_slice)
        self._pool_of_slice[name] = new_pool_id
        after = pool.no_execute_taints() if pool.tainted else {}
        changes[new_pool_id] = _changed_devices(before, after)
        return {pool_id: devices for pool_id, devices in changes.items() if devices}

    def delete(self, slice_name: str) -> dict[PoolId, set[str]]:
        pool_id = self._pool_of_slice.get(slice_name)
        if pool_id is None:
            return {}
        return {pid: devices for pid, devices in self._remove(slice_name, pool_id).items() if devices}

    def _remove(self, slice_name: str, pool_id: PoolId) -> dict[PoolId, set[str]]:
        pool = self._pools[pool_id]
        before = pool.no_execute_taints() if pool.tainted else {}
        pool.remove(slice_name)
        del self._pool_of_slice[slice_name]
        if not pool.slices:
            del self._pools[pool_id]
        after = pool.no_execute_taints() if pool.tainted else {}
        return {pool_id: _changed_devices(before, after)}


def _has_no_execute(resource_slice: ResourceSlice) -> bool:
    return any(t.effect == EFFECT_NO_EXECUTE for d in resource_slice.spec.devices for t in d.taints)


def _changed_devices(
    before: dict[str, tuple[DeviceTaint, ...]], after: dict[str, tuple[DeviceTaint, ...]]
) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
