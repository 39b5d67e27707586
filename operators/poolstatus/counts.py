"""Which published devices are allocated, unavailable or available (decision D6).

Every published device entry has exactly one :class:`DeviceAvailability`, so the status
always satisfies ``totalDevices = allocatedDevices + availableDevices + unavailableDevices``:

* *allocated*: named by at least one allocation result that is not admin access;
* *unavailable*: not allocated, and tainted ``NoSchedule``/``NoExecute`` by the device
  itself or by a DeviceTaintRule;
* *available*: everything else.

An allocation result counts only when it names a device the pool publishes at its newest
generation; results naming vanished devices would describe devices that do not exist.
Many results (or shares) on one device count once.

Claims are visited in (namespace, name, uid) order, so the sums built from their results
later on do not depend on the order in which the cache delivered them.
"""

from __future__ import annotations

import enum
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from operators.dra.pools import PoolId
from operators.dra.quantity import Quantity
from operators.dra.taintrules import rule_matches

from .models import Device, DeviceTaintRule, ResourceClaim
from .pools import Pool

UNAVAILABLE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class DeviceAvailability(enum.Enum):
    """What a published device entry is counted as in ``status``: allocated, unavailable
    (tainted) or available. Not a DeviceClass: it is the entry's state, not a Kubernetes kind."""

    ALLOCATED = "allocated"
    UNAVAILABLE = "unavailable"
    AVAILABLE = "available"


@dataclass(frozen=True)
class DeviceCounts:
    total: int
    allocated: int
    available: int
    unavailable: int


class Held(NamedTuple):
    """One allocation result that consumes its device: all the computation reads of it.

    A small tuple of interned strings: the cache keeps this, not the claim, so thousands of
    allocated claims cost a few hundred KiB.
    """

    driver: str
    pool: str
    device: str
    consumed_capacity: Mapping[str, Quantity] | None = None


def held_devices(claim: ResourceClaim) -> tuple[Held, ...]:
    """The claim's non-admin allocation results (admin access observes, it does not consume)."""
    allocation = claim.status.allocation
    if allocation is None:
        return ()
    return tuple(
        Held(sys.intern(r.driver), sys.intern(r.pool), sys.intern(r.device), r.consumed_capacity or None)
        for r in allocation.devices.results
        if not r.admin_access
    )


@dataclass(frozen=True)
class PoolUsage:
    in_use: frozenset[str]
    """Published device names held by at least one considered result."""
    results: tuple[Held, ...]
    """Considered results, in claim order: they name published devices of the pool."""


def index_results(claims: Iterable[ResourceClaim]) -> dict[PoolId, list[Held]]:
    """Non-admin allocation results of allocated claims, grouped by pool, in claim order."""
    by_pool: dict[PoolId, list[Held]] = defaultdict(list)
    ordered = sorted(claims, key=lambda c: (c.metadata.namespace or "", c.metadata.name, c.metadata.uid))
    for claim in ordered:
        for held in held_devices(claim):
            by_pool[(held.driver, held.pool)].append(held)
    return by_pool


def pool_usage(pool: Pool, pool_results: Sequence[Held]) -> PoolUsage:
    published = pool.device_names
    considered = tuple(r for r in pool_results if r.device in published)
    return PoolUsage(in_use=frozenset(r.device for r in considered), results=considered)


def rules_for_driver(rules: Iterable[DeviceTaintRule], driver: str) -> list[DeviceTaintRule]:
    """The rules that can make some device of ``driver`` unavailable.

    A rule whose selector also names a class or CEL selectors is left out, as every operator leaves
    it (:func:`operators.dra.taintrules.narrows_beyond_names`): its devices would need class or CEL
    lookups, and reading the names alone would count devices it does not taint.
    """
    relevant = []
    for rule in rules:
        selector = rule.spec.device_selector
        if rule.spec.taint.effect not in UNAVAILABLE_EFFECTS or selector is None:
            continue  # a nil selector matches nothing
        if rule.narrowing_fields:
            continue
        if selector.driver is not None and selector.driver != driver:
            continue
        relevant.append(rule)
    return relevant


def is_tainted(device: Device, pool: Pool, driver_rules: Sequence[DeviceTaintRule]) -> bool:
    """Whether ``device`` carries, or is given by a rule, a taint that blocks scheduling."""
    if any(taint.effect in UNAVAILABLE_EFFECTS for taint in device.taints or ()):
        return True
    return any(
        rule_matches(rule.spec.device_selector, pool.driver, pool.name, device.name) for rule in driver_rules
    )


def device_availability(
    pool: Pool, in_use: frozenset[str], driver_rules: Sequence[DeviceTaintRule]
) -> tuple[DeviceAvailability, ...]:
    """The availability of each entry of ``pool.devices``, index for index."""
    return tuple(_availability(published.device, pool, in_use, driver_rules) for published in pool.devices)


def _availability(
    device: Device, pool: Pool, in_use: frozenset[str], driver_rules: Sequence[DeviceTaintRule]
) -> DeviceAvailability:
    # Allocation wins over taints, so a device is never subtracted twice (decision D6).
    if device.name in in_use:
        return DeviceAvailability.ALLOCATED
    if is_tainted(device, pool, driver_rules):
        return DeviceAvailability.UNAVAILABLE
    return DeviceAvailability.AVAILABLE


def count_availability(availability: Sequence[DeviceAvailability]) -> DeviceCounts:
    return DeviceCounts(
        total=len(availability),
        allocated=sum(1 for a in availability if a is DeviceAvailability.ALLOCATED),
        available=sum(1 for a in availability if a is DeviceAvailability.AVAILABLE),
        unavailable=sum(1 for a in availability if a is DeviceAvailability.UNAVAILABLE),
    )
