"""A published device as a CEL selector sees it: a slice device with its attributes and capacities.

What DeviceClass and request selectors evaluate (``device.attributes``, ``device.capacity``,
``device.allowMultipleAllocations``), for every reader that selects devices as the scheduler does:
taintselector's selections, and ``kubectl dra explain``'s account of why a device does not match.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from operators.core.models import NoneAsEmptyMap

from .cel import CelDevice, DeviceAttribute, DeviceCapacity
from .slices import SliceDevice


class SelectableDevice(SliceDevice):
    """A device as CEL sees it."""

    attributes: Annotated[Mapping[str, DeviceAttribute], NoneAsEmptyMap] = {}
    capacity: Annotated[Mapping[str, DeviceCapacity], NoneAsEmptyMap] = {}
    allow_multiple_allocations: bool | None = None

    def cel_device(self, driver: str) -> CelDevice:
        return CelDevice(
            driver=driver,
            attributes=self.attributes,
            capacity=self.capacity,
            allow_multiple_allocations=self.allow_multiple_allocations,
        )
