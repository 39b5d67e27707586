"""The ResourceClaim as the operators read it: one lean projection, generic in its allocation.

A claim's metadata, its consumers (``status.reservedFor``) and the shape of an allocation (devices,
each result naming a driver, pool and device) mean the same to every operator, so they are modelled
here once. What a result carries beyond the device it names (tolerations for eviction, admin access
and consumed capacity for counting) differs per reader and costs memory in every cache of claims,
so each operator names its own result view: ``AllocationResult[ThatResult]``, and its claim is a
``ResourceClaim[AllocationResult[ThatResult]]``. An operator that only asks whether a claim is
allocated keeps no allocation at all: its claim is a ``ResourceClaim[bool]`` whose status reads
the allocation as its presence.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Annotated, Any, Generic, TypeVar

from operators.core.models import KubeModel, LeanObject, NoneAsEmpty

from .pools import DeviceId
from .taints import DeviceToleration


class ConsumerReference(KubeModel):
    """One ``status.reservedFor[]`` entry."""

    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""

    @property
    def is_pod(self) -> bool:
        # PodGroup consumers (scheduling.k8s.io/podgroups) are not pods.
        return self.api_group == "" and self.resource == "pods"


class DeviceRequestAllocationResult(KubeModel):
    """One ``status.allocation.devices.results[]`` entry: the device it allocates."""

    driver: str
    pool: str
    device: str


class ResultWithTolerations(DeviceRequestAllocationResult):
    """A result as eviction reads it: the device, and the taints its request tolerates there."""

    tolerations: Annotated[tuple[DeviceToleration, ...], NoneAsEmpty] = ()


ResultT = TypeVar("ResultT", bound=DeviceRequestAllocationResult)


class DeviceAllocationResult(KubeModel, Generic[ResultT]):
    results: Annotated[tuple[ResultT, ...], NoneAsEmpty] = ()


class AllocationResult(KubeModel, Generic[ResultT]):
    devices: DeviceAllocationResult[ResultT] = DeviceAllocationResult()


AllocationT = TypeVar("AllocationT")


class ResourceClaimStatus(KubeModel, Generic[AllocationT]):
    allocation: AllocationT | None = None
    reserved_for: Annotated[tuple[ConsumerReference, ...], NoneAsEmpty] = ()


class ResourceClaim(LeanObject, Generic[AllocationT]):
    status: ResourceClaimStatus[AllocationT] = ResourceClaimStatus()


def is_allocated(claim: ResourceClaim[Any]) -> bool:
    """Whether the scheduler has allocated devices to ``claim``: the caches that count or evict on
    devices keep only such claims."""
    return claim.status.allocation is not None


def results_on(
    claim: ResourceClaim[AllocationResult[ResultT]], devices: Container[DeviceId]
) -> list[ResultT]:
    """The results of ``claim`` that allocate one of ``devices``: what a taint on those devices
    weighs against the claim's tolerations. None when the claim is not allocated."""
    allocation = claim.status.allocation
    if allocation is None:
        return []
    return [
        result
        for result in allocation.devices.results
        if DeviceId(result.driver, result.pool, result.device) in devices
    ]
