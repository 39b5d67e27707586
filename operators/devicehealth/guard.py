"""The blast-radius guard: which signalled devices the policy may taint now, and which wait.

A driver bug that marks every device unhealthy must not evict every workload
(docs/device-health.md, "The blast-radius guard"). The policy never has more than
``maxUnavailable`` devices tainted at once, counted over its scope and, for a percentage, per pool
as well. Devices it has already tainted keep their place, even beyond a limit that was lowered
since (removing a rule would return a failed device to service); new candidates take the free
places longest signalled first, then by driver, pool and device, so the answer never depends on
the order in which events arrived.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .models import DeviceId
from .validation import Limit

__all__ = ["Guarded", "guard"]


@dataclass(frozen=True)
class Guarded:
    taint: tuple[DeviceId, ...]
    """Candidates that take a free place, in the order they took it."""
    held_back: tuple[DeviceId, ...]


def guard(
    limit: Limit,
    scope: Sequence[DeviceId],
    tainted: Iterable[DeviceId],
    candidates: Iterable[tuple[datetime, DeviceId]],
) -> Guarded:
    """``candidates`` are (signal start, device) of the signalled devices not tainted yet."""
    total_limit = limit.of(len(scope))
    pool_sizes = Counter((device.driver, device.pool) for device in scope)
    taken = list(tainted)
    used = Counter((device.driver, device.pool) for device in taken)
    count = len(taken)
    chosen: list[DeviceId] = []
    held: list[DeviceId] = []
    for _, device in sorted(candidates):
        pool = (device.driver, device.pool)
        pool_full = limit.percent and used[pool] >= limit.of(pool_sizes[pool])
        if count >= total_limit or pool_full:
            held.append(device)
            continue
        chosen.append(device)
        used[pool] += 1
        count += 1
    return Guarded(tuple(chosen), tuple(held))
