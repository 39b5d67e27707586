"""``shareableSummary``: devices that several claims may share, and their capacity.

A shareable device (``allowMultipleAllocations: true``) is handed out in slices of its
capacity. The summary follows the seed's definitions (decision D5):

* *fully available*: no claim holds a share;
* *partially available*: some but not all capacity is consumed; a device on which every
  capacity is used up (exhausted) is neither fully nor partially available. A share of
  zero amounts still holds the device, so "in use" counts as "some consumed";
* *capacity*: per capacity name, the pool-wide total, consumed and available amounts.

Capacity names are compared after qualifying bare names with the driver's domain, because
drivers and the scheduler spell the same capacity both ways (``bandwidth`` and
``net.example.com/bandwidth``). The name reported is the first spelling in canonical
device order. Only results that name published devices count (decision D6).
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.dra.quantity import Quantity

from . import messages
from .counts import PoolUsage
from .models import Device
from .pools import Pool

_ZERO = Quantity()


@dataclass(frozen=True)
class CapacityEntry:
    name: str
    total: Quantity
    consumed: Quantity
    available: Quantity

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "total": str(self.total),
            "consumed": str(self.consumed),
            "available": str(self.available),
        }


@dataclass(frozen=True)
class ShareableSummary:
    fully_available: int
    partially_available: int
    capacity: tuple[CapacityEntry, ...]

    def to_dict(self) -> dict[str, object]:
        summary: dict[str, object] = {
            "fullyAvailableDevices": self.fully_available,
            "partiallyAvailableDevices": self.partially_available,
        }
        if self.capacity:
            summary["capacity"] = [entry.to_dict() for entry in self.capacity]
        return summary


@dataclass(frozen=True)
class ShareableView:
    """Either a summary, an error, or neither (the pool has no shareable devices)."""

    summary: ShareableSummary | None = None
    error: str | None = None


def qualified_capacity_name(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _device_capacity(driver: str, device: Device) -> dict[str, tuple[str, Quantity]]:
    """Qualified name -> (spelling, value). A name spelled twice on one device counts once."""
    capacity: dict[str, tuple[str, Quantity]] = {}
    for spelling, entry in sorted(device.capacity.items()):
        capacity.setdefault(qualified_capacity_name(driver, spelling), (spelling, entry.value))
    return capacity


def _consumption_by_device(driver: str, usage: PoolUsage) -> dict[str, dict[str, Quantity]]:
    """Device name -> qualified capacity name -> amount consumed by all results."""
    consumed: dict[str, dict[str, Quantity]] = {}
    for result in usage.results:
        for spelling, amount in (result.consumed_capacity or {}).items():
            per_device = consumed.setdefault(result.device, {})
            key = qualified_capacity_name(driver, spelling)
            per_device[key] = per_device.get(key, _ZERO) + amount
    return consumed


def shareable_view(pool: Pool, usage: PoolUsage) -> ShareableView:
    """Spec section 11."""
    shareable = [p for p in pool.devices if p.device.allow_multiple_allocations]
    if not shareable:
        return ShareableView()

    consumption = _consumption_by_device(pool.driver, usage)
    fully = partially = 0
    spellings: dict[str, str] = {}
    totals: dict[str, Quantity] = {}
    consumed_totals: dict[str, Quantity] = {}
    for published in shareable:
        capacity = _device_capacity(pool.driver, published.device)
        consumed = consumption.get(published.name, {})
        if published.name not in usage.in_use:
            fully += 1
        else:
            exhausted = bool(capacity) and all(
                consumed.get(key, _ZERO) >= value for key, (_, value) in capacity.items()
            )
            if not exhausted:
                partially += 1
        for key, (spelling, value) in capacity.items():
            spellings.setdefault(key, spelling)
            totals[key] = totals.get(key, _ZERO) + value
            consumed_totals[key] = consumed_totals.get(key, _ZERO) + consumed.get(key, _ZERO)

    if len(totals) > messages.MAX_SUMMARY_ENTRIES:
        return ShareableView(error=messages.shareable_summary_over_cap(pool.driver, pool.name, len(totals)))
    entries = sorted(
        (
            CapacityEntry(
                name=spellings[key],
                total=totals[key],
                consumed=consumed_totals[key],
                available=(totals[key] - consumed_totals[key]).non_negative(),
            )
            for key in totals
        ),
        key=lambda entry: entry.name,
    )
    return ShareableView(summary=ShareableSummary(fully, partially, tuple(entries)))
