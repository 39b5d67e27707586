"""``partitionSummary``: how many devices of each partition type could still be allocated.

A partitionable physical device is published as several devices of different *types*
(Full, Half, MIG profiles...) that draw on the same shared counters. For each type the
summary reports how many exist and how many more could be allocated *together* given what
is already consumed. Entries are alternatives and must never be summed.

Decisions that differ from upstream (spec section 18):

* D2: the grouping attribute is resolved per device: the device's own slice declaration,
  else the request's default. Only counter-consuming devices are partitions, so plain
  devices never cause an error.
* D3: a type's cost is the multiset of counter maps it consumes, *ignoring* the counter
  set name and comparing quantities by value, so one counter set per GPU is fine.
* D4: the greedy fit honours compatibility groups per counter set, seeded from the
  devices already in use.
* D10: unavailable (tainted, unallocated) devices are never counted as allocatable.

The fit is greedy in canonical order: with one set and no groups it equals
``min(fresh devices, floor(available / cost))``.

A counter whose remaining amount cannot be computed exactly (a driver published quantities
more than :data:`~operators.dra.quantity.MAX_EXACT_DIGITS` digits apart, such as a counter of
``1e2147483647`` that devices consume ``1`` of) makes the view an error, as the other
problems of a pool's data do; Go would spend hours expanding the power of ten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from operators.core.models import camel_fields
from operators.dra.quantity import Quantity, QuantityRangeError

from . import messages
from .compatibility import EMPTY, CompatibilityState
from .counts import DeviceAvailability
from .models import Device
from .pools import Pool, PublishedDevice

CostSignature = tuple[tuple[tuple[str, Quantity], ...], ...]


@dataclass(frozen=True)
class PartitionEntry:
    attribute: str
    type: str
    total: int
    allocatable: int

    def to_dict(self) -> dict[str, object]:
        return camel_fields(self)


@dataclass(frozen=True)
class PartitionView:
    """Either a summary, an error, or neither (the pool has no partitions)."""

    summary: tuple[PartitionEntry, ...] | None = None
    error: str | None = None


def grouping_attribute(published: PublishedDevice, default_attribute: str | None) -> str | None:
    """The attribute that names ``published``'s partition type, or None if it is no partition."""
    if not published.device.consumes_counters:
        return None
    return published.slice_partition_attribute or default_attribute or None


def partition_type(driver: str, device: Device, attribute: str) -> str | None:
    """The non-empty string value of ``attribute`` on ``device``, else None.

    An attribute in the driver's own domain may also be published under its bare name;
    the fully qualified key wins when both exist.
    """
    value = device.attributes.get(attribute)
    if value is None:
        bare = attribute.removeprefix(driver + "/")
        if bare != attribute:
            value = device.attributes.get(bare)
    if value is None or not value.string:
        return None
    return value.string


def cost_signature(device: Device) -> CostSignature:
    entries = (
        tuple(sorted((name, c.value) for name, c in e.counters.items()))
        for e in device.consumes_counters or ()
    )
    return tuple(sorted(entries))


@dataclass
class _Group:
    signature: CostSignature
    members: list[int] = field(default_factory=list)
    """Indexes into pool.devices."""


class _CounterOutOfRange(Exception):
    """A counter's remaining amount needs more digits than exact arithmetic allows."""

    def __init__(self, counter_set: str, counter: str) -> None:
        super().__init__(counter_set, counter)
        self.counter_set = counter_set
        self.counter = counter


def _remaining(counter_set: str, counter: str, have: Quantity, cost: Quantity) -> Quantity:
    try:
        return have - cost
    except QuantityRangeError as error:
        raise _CounterOutOfRange(counter_set, counter) from error


@dataclass
class _Headroom:
    """Remaining counters and compatibility state per counter set, during one walk."""

    counters: dict[str, dict[str, Quantity]]
    compatibility: dict[str, CompatibilityState]

    @classmethod
    def fresh(cls, shared: Mapping[str, Mapping[str, Quantity]]) -> _Headroom:
        return cls({name: dict(values) for name, values in shared.items()}, dict.fromkeys(shared, EMPTY))

    def copy(self) -> _Headroom:
        return _Headroom(
            {name: dict(values) for name, values in self.counters.items()}, dict(self.compatibility)
        )

    def consume_in_use(self, device: Device) -> None:
        """Charge a device that is already allocated; it may overdraw or block a set."""
        for entry in device.consumes_counters or ():
            counters = self.counters.get(entry.counter_set)
            if counters is None:
                continue
            for name, cost in entry.counters.items():
                if name in counters:
                    counters[name] = _remaining(entry.counter_set, name, counters[name], cost.value)
            state = self.compatibility[entry.counter_set]
            self.compatibility[entry.counter_set] = state.fold(entry.compatibility_groups)

    def try_place(self, device: Device) -> bool:
        """Charge ``device`` if every counter set it draws on has room and admits it."""
        touched_counters: dict[str, dict[str, Quantity]] = {}
        touched_states: dict[str, CompatibilityState] = {}
        # Entries are applied one after another, so two entries on one set both count.
        for entry in device.consumes_counters or ():
            set_name = entry.counter_set
            if set_name not in self.counters:
                return False
            counters = touched_counters.setdefault(set_name, dict(self.counters[set_name]))
            for name, cost in entry.counters.items():
                have = counters.get(name)
                if have is None or have < cost.value:
                    return False
                counters[name] = _remaining(set_name, name, have, cost.value)
            state = touched_states.get(set_name, self.compatibility[set_name])
            if not state.admits(entry.compatibility_groups):
                return False
            touched_states[set_name] = state.fold(entry.compatibility_groups)
        self.counters.update(touched_counters)
        self.compatibility.update(touched_states)
        return True


def partition_view(
    pool: Pool,
    availability: Sequence[DeviceAvailability],
    default_attribute: str | None,
) -> PartitionView:
    """Spec section 9. ``availability`` holds that of each entry of ``pool.devices``."""
    groups: dict[tuple[str, str], _Group] = {}
    grouped_any = False
    for index, published in enumerate(pool.devices):
        attribute = grouping_attribute(published, default_attribute)
        if attribute is None:
            continue
        if not grouped_any:
            grouped_any = True
            if not pool.shared_counters:
                return PartitionView(error=messages.partitions_without_counters(pool.driver, pool.name))
        value = partition_type(pool.driver, published.device, attribute)
        if value is None:
            return PartitionView(
                error=messages.partition_type_missing(pool.driver, pool.name, published.name, attribute)
            )
        signature = cost_signature(published.device)
        group = groups.setdefault((attribute, value), _Group(signature))
        if group.signature != signature:
            return PartitionView(error=messages.partition_cost_mismatch(pool.driver, pool.name, value))
        group.members.append(index)

    if not grouped_any:
        return PartitionView()
    if len(groups) > messages.MAX_SUMMARY_ENTRIES:
        return PartitionView(error=messages.partition_summary_over_cap(pool.driver, pool.name, len(groups)))

    try:
        entries = _fit(pool, availability, groups)
    except _CounterOutOfRange as error:
        return PartitionView(
            error=messages.partition_counter_out_of_range(
                pool.driver, pool.name, error.counter_set, error.counter
            )
        )
    return PartitionView(summary=entries)


def _fit(
    pool: Pool, availability: Sequence[DeviceAvailability], groups: Mapping[tuple[str, str], _Group]
) -> tuple[PartitionEntry, ...]:
    baseline = _Headroom.fresh(pool.shared_counters)
    for index, published in enumerate(pool.devices):
        if availability[index] is DeviceAvailability.ALLOCATED:
            baseline.consume_in_use(published.device)

    entries = []
    for (attribute, value), group in sorted(groups.items()):
        headroom = baseline.copy()
        allocatable = 0
        for index in group.members:
            # Allocated devices are already in the baseline; unavailable ones cannot be had (D10).
            available = availability[index] is DeviceAvailability.AVAILABLE
            if available and headroom.try_place(pool.devices[index].device):
                allocatable += 1
        entries.append(PartitionEntry(attribute, value, len(group.members), allocatable))
    return tuple(entries)
