"""The pool index of devicetaint: which devices' NoExecute taints a slice event changes, and what
a large pool costs per event."""

from __future__ import annotations

import time
from typing import Any

from devicetaint_builders import DRIVER, resource_slice, taint

from operators.devicetaint.models import ResourceSlice
from operators.devicetaint.pools import Pool, PoolIndex
from operators.dra.pools import PoolId

POOL: PoolId = (DRIVER, "big")


def _slice(index: int, devices: int = 128, **kwargs: Any) -> ResourceSlice:
    names = [f"dev-{index:04d}-{d:03d}" for d in range(devices)]
    return resource_slice(name=f"big-{index:04d}", pool="big", devices=names, **kwargs)


def test_a_pool_of_1000_slices_without_taints_costs_little_per_event() -> None:
    """Each event used to compare the NoExecute taints of every visible device of the pool, before
    and after: quadratic in the slices of a pool, minutes of CPU for 1000 slices of 128 devices."""
    index = PoolIndex()
    slices = [_slice(i) for i in range(1000)]
    started = time.process_time()
    for resource_slice_ in slices:
        assert index.apply(resource_slice_) == {}
    for resource_slice_ in slices[:500]:
        assert index.delete(resource_slice_.metadata.name) == {}
    # Linear, this takes milliseconds; quadratic, it took over a minute.
    assert time.process_time() - started < 5
    pool = index.get(POOL)
    assert pool is not None
    assert len(pool.visible_devices()) == 500 * 128


def test_taints_appearing_and_going_are_still_reported() -> None:
    index = PoolIndex()
    for i in range(3):
        index.apply(_slice(i, devices=2))
    tainted = _slice(1, devices=2, taints={"dev-0001-001": [taint()]})
    assert index.apply(tainted) == {POOL: {"dev-0001-001"}}
    pool = index.get(POOL)
    assert isinstance(pool, Pool)
    assert pool.tainted == {"big-0001"}
    # Another untainted slice changes nothing, though the pool holds a taint.
    assert index.apply(_slice(3, devices=2)) == {}
    # The taint goes with an update of its slice...
    assert index.apply(_slice(1, devices=2)) == {POOL: {"dev-0001-001"}}
    assert pool.tainted == set()
    # ...or with the slice itself.
    index.apply(tainted)
    assert index.delete("big-0001") == {POOL: {"dev-0001-001"}}
    assert pool.tainted == set()


def test_a_tainted_slice_of_an_older_generation_stays_invisible() -> None:
    index = PoolIndex()
    index.apply(_slice(0, devices=1, generation=2))
    old = _slice(1, devices=1, generation=1, taints={"dev-0001-000": [taint()]})
    assert index.apply(old) == {}
    # The newer generation going makes the old one, and its taint, visible.
    assert index.delete("big-0000") == {POOL: {"dev-0001-000"}}
