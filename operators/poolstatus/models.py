"""Typed projections of the objects the pool-status computation reads.

Only the fields of spec section 6.2 are modelled; everything else is ignored on parse, so
the caches stay small. The models mirror the API's nesting (``metadata``/``spec``/``status``)
so a watch-event body validates directly: ``ResourceSlice.model_validate(body)``.

Quantities are parsed when a model is built, so a malformed value fails at the cache
boundary rather than in the middle of an evaluation.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from operators.core.models import KubeModel, ObjectMeta
from operators.dra import claims, slices, taintrules
from operators.dra.quantity import Quantity
from operators.dra.slices import CounterSet, DeviceCounterConsumption


class NameMeta(KubeModel):
    """The metadata of the cached kinds: their keys, and nothing that would cost memory."""

    name: str = ""
    namespace: str | None = None
    uid: str = ""


# ResourceSlice (resource.k8s.io/v1): the shared projection with the counted device -------


class DeviceAttribute(KubeModel):
    # Only string values can name a partition type; other value kinds count as missing.
    string: str | None = Field(default=None, alias="string")


class DeviceCapacity(KubeModel):
    value: Quantity


class Device(slices.SliceDevice):
    """A device as counted: what partitions it, what it consumes, whether it may be shared."""

    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] | None = None
    allow_multiple_allocations: bool | None = None

    @field_validator("attributes", mode="before")
    @classmethod
    def _attributes_that_can_name_a_type(cls, value: Any) -> Any:
        # A value of another kind reads as missing; dropping it keeps 10000s of cached devices
        # small (most drivers publish mainly int, bool and version values). Under a qualified
        # key whose bare name is published too it is kept without its value: the qualified key
        # wins the lookup (spec section 9 step 4), so the bare key's string must not answer.
        if not isinstance(value, dict):
            return value
        kept: dict[str, Any] = {}
        for key, attribute in value.items():
            if not isinstance(attribute, dict) or "string" in attribute:
                kept[key] = attribute
            elif _shadows_bare_key(key, value):
                kept[key] = {}
        return kept


def _shadows_bare_key(key: str, attributes: dict[str, Any]) -> bool:
    _, slash, bare = key.partition("/")
    return bool(slash) and bare in attributes


class ResourceSliceSpec(slices.ResourceSliceSpec[Device]):
    node_name: str | None = None
    partition_type_attribute: str | None = None
    shared_counters: tuple[CounterSet, ...] | None = None


class ResourceSlice(slices.ResourceSlice[Device]):
    spec: ResourceSliceSpec


# ResourceClaim (resource.k8s.io/v1): the shared allocation with the counted result ----------


class DeviceRequestAllocationResult(claims.DeviceRequestAllocationResult):
    """A result as counted: whether it only observes its device, and what capacity it consumes."""

    # A result that names no device (the API refuses one) counts nothing, rather than hiding the
    # other results of its claim.
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    consumed_capacity: dict[str, Quantity] | None = None


class ResourceClaimStatus(KubeModel):
    # Counting reads no consumers, and every claim of the cluster is cached.
    allocation: claims.AllocationResult[DeviceRequestAllocationResult] | None = None


class ResourceClaim(KubeModel):
    # Not the shared claim: its lean metadata would cost every cached claim more than these keys.
    metadata: NameMeta = NameMeta()
    status: ResourceClaimStatus = ResourceClaimStatus()


# DeviceTaintRule: the core projection (a selector that also names a class or CEL selectors, as
# 1.34's v1alpha3 could, needs lookups this operator does not do, so such a rule is ignored, as
# every operator ignores it: spec section 6.1, operators.dra.taintrules.narrows_beyond_names).
DeviceTaintRule = taintrules.DeviceTaintRule


# ResourcePoolStatusRequest (both surfaces) ----------------------------------------------

DEFAULT_LIMIT = 100


class RequestSpec(KubeModel):
    driver: str
    pool_name: str | None = None
    limit: int | None = None
    default_partition_type_attribute: str | None = None

    @property
    def effective_limit(self) -> int:
        # The API server defaults the field, but an absent value still means 100.
        return DEFAULT_LIMIT if self.limit is None else self.limit


class ConditionTime(KubeModel):
    type: str = ""
    last_transition_time: str | None = None


class RequestStatus(KubeModel):
    conditions: tuple[ConditionTime, ...] | None = None


class ResourcePoolStatusRequest(KubeModel):
    metadata: ObjectMeta = ObjectMeta()
    spec: RequestSpec
    status: RequestStatus | None = None
