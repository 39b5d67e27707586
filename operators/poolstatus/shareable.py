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

A capacity whose sums cannot be computed exactly (a driver published quantities more than
:data:`~operators.dra.quantity.MAX_EXACT_DIGITS` digits apart, such as ``1e2147483647`` and
``1``) makes the view an error, as too many capacity names does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from operators.dra.quantity import Quantity, QuantityRangeError

from . import messages
from .counts import PoolUsage
from .models import Device
from .pools import Pool, PublishedDevice

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


def _consumption_by_device(driver: str, usage: PoolUsage) -> dict[str, dict[str, list[Quantity]]]:
    """Device name -> qualified capacity name -> the amounts results consumed, in claim order."""
    consumed: dict[str, dict[str, list[Quantity]]] = {}
    for result in usage.results:
        for spelling, amount in (result.consumed_capacity or {}).items():
            per_device = consumed.setdefault(result.device, {})
            per_device.setdefault(qualified_capacity_name(driver, spelling), []).append(amount)
    return consumed


class _CapacityOutOfRange(Exception):
    """A capacity's sum needs more digits than exact arithmetic allows."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _sum(key: str, *terms: Quantity) -> Quantity:
    """The sum from zero (so it takes the format of its first non-zero term)."""
    total = _ZERO
    try:
        for term in terms:
            total = total + term
    except QuantityRangeError as error:
        raise _CapacityOutOfRange(key) from error
    return total


def shareable_view(pool: Pool, usage: PoolUsage) -> ShareableView:
    """Spec section 11."""
    shareable = [
        (published, _device_capacity(pool.driver, published.device))
        for published in pool.devices
        if published.device.allow_multiple_allocations
    ]
    if not shareable:
        return ShareableView()
    spellings: dict[str, str] = {}
    for _, capacity in shareable:
        for key, (spelling, _) in capacity.items():
            spellings.setdefault(key, spelling)
    if len(spellings) > messages.MAX_SUMMARY_ENTRIES:
        return ShareableView(
            error=messages.shareable_summary_over_cap(pool.driver, pool.name, len(spellings))
        )
    try:
        summary = _summary(shareable, usage, _consumption_by_device(pool.driver, usage), spellings)
    except _CapacityOutOfRange as error:
        return ShareableView(
            error=messages.shareable_capacity_out_of_range(pool.driver, pool.name, spellings[error.key])
        )
    return ShareableView(summary=summary)


def _summary(
    shareable: Sequence[tuple[PublishedDevice, dict[str, tuple[str, Quantity]]]],
    usage: PoolUsage,
    consumption: Mapping[str, Mapping[str, Sequence[Quantity]]],
    spellings: Mapping[str, str],
) -> ShareableSummary:
    fully = partially = 0
    totals: dict[str, Quantity] = {}
    consumed_totals: dict[str, Quantity] = {}
    for published, capacity in shareable:
        amounts = consumption.get(published.name, {})
        # Only the device's own capacity names count: a result's other names are ignored.
        consumed = {key: _sum(key, *amounts.get(key, ())) for key in capacity}
        if published.name not in usage.in_use:
            fully += 1
        else:
            exhausted = bool(capacity) and all(consumed[key] >= value for key, (_, value) in capacity.items())
            if not exhausted:
                partially += 1
        for key, (_, value) in capacity.items():
            totals[key] = _sum(key, totals.get(key, _ZERO), value)
            consumed_totals[key] = _sum(key, consumed_totals.get(key, _ZERO), consumed[key])

    entries = sorted(
        (
            CapacityEntry(
                name=spellings[key],
                total=totals[key],
                consumed=consumed_totals[key],
                available=_sum(key, totals[key], -consumed_totals[key]).non_negative(),
            )
            for key in totals
        ),
        key=lambda entry: entry.name,
    )
    return ShareableSummary(fully, partially, tuple(entries))
