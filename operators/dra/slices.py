"""The ResourceSlice as every operator reads it: one lean projection, generic in its device.

The slice, its pool and a device's name and taints mean the same to every operator, so they are
modelled here once. What a device carries beyond that (attributes for CEL, capacities and counters
for counting, raw values for an action) differs per operator and costs memory in every cache that
holds slices, so each operator names its own device view: ``ResourceSlice[ThatDevice]``. An
operator that needs more of the spec (poolstatus's counters) subclasses :class:`ResourceSliceSpec`.

Slices are cluster-scoped and nobody reads their labels or owners: the metadata keeps the name,
and the uid and generation that a warning about a slice names.
"""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import Field

from operators.core.models import KubeModel, NoneAsEmpty

from .quantity import Quantity
from .taints import DeviceTaint

KIND = "ResourceSlice"
PLURAL = "resourceslices"


class SliceMeta(KubeModel):
    name: str = ""
    uid: str = ""
    generation: int = 0


class ResourcePool(KubeModel):
    name: str
    generation: int = 0
    # The API requires a positive count; an absent one is read as "no announced count", which a
    # pool of any size satisfies.
    resource_slice_count: int = 0


class SliceDevice(KubeModel):
    """One ``spec.devices[]`` entry: its name and taints (they cost nothing when absent)."""

    name: str
    taints: Annotated[tuple[DeviceTaint, ...], NoneAsEmpty] = ()


class Counter(KubeModel):
    value: Quantity


class CounterSet(KubeModel):
    """One ``spec.sharedCounters[]`` entry of a slice: what its partitionable devices draw on."""

    name: str
    counters: dict[str, Counter] = Field(default_factory=dict)


class DeviceCounterConsumption(KubeModel):
    """One ``consumesCounters[]`` entry of a device: what it takes from a counter set when allocated."""

    counter_set: str
    counters: dict[str, Counter] = Field(default_factory=dict)
    compatibility_groups: tuple[str, ...] | None = None


DeviceT = TypeVar("DeviceT", bound=SliceDevice)


class ResourceSliceSpec(KubeModel, Generic[DeviceT]):
    driver: str
    pool: ResourcePool
    devices: Annotated[tuple[DeviceT, ...], NoneAsEmpty] = ()


class ResourceSlice(KubeModel, Generic[DeviceT]):
    metadata: SliceMeta = SliceMeta()
    spec: ResourceSliceSpec[DeviceT]

    @property
    def name(self) -> str:
        return self.metadata.name
