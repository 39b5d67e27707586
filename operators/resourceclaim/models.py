"""Typed projections of the three kinds the operator watches (spec section 3).

Only the fields the operator reads are modelled; everything else is ignored on parsing.
Explicit JSON ``null`` values are treated like absent fields, because Go serialises some
empty pointers that way (``creationTimestamp: null`` inside templates, for example) and a
watch handler must never fail on such input. The Pod and the ResourceClaim are the shared
projections of :mod:`operators.dra`, which read only a null list as empty, so they are read with
that rule applied below their spec and status; the pod adds its phase, the claim keeps only
whether it is allocated.

A ResourceClaim also keeps its raw body (without ``managedFields``): section 8 writes
claims back with full-object PUTs carrying the cached ``resourceVersion``, and those must
preserve every field we do not model. It is kept as compact JSON text, a fraction of the
memory of the parsed object, and parsed again only for the rare write.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_snake

from operators.core import wirejson
from operators.core.models import KubeModel, LeanMeta, ObjectMeta
from operators.dra import claims, pods

from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION

READ_ANNOTATIONS = (POD_CLAIM_NAME_ANNOTATION, EXTENDED_RESOURCE_CLAIM_ANNOTATION)


class _Projection(KubeModel):
    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        return _without_nulls(data)


# Where the shared projections nest objects of their own, each read with its nulls as absent
# (a list field, entry by entry); the metadata keeps the shared rule.
_Nesting = Mapping[str, "_Nesting"]


def _both_spellings(nesting: _Nesting) -> _Nesting:
    """The nesting under the API's names and the Python ones, which the models accept too."""
    return {
        spelling: _both_spellings(inner)
        for key, inner in nesting.items()
        for spelling in (key, to_snake(key))
    }


_POD_NESTING = _both_spellings(
    {
        "spec": {"resourceClaims": {}, "schedulingGroup": {}},
        "status": {"resourceClaimStatuses": {}, "extendedResourceClaimStatus": {}},
    }
)
_CLAIM_NESTING = _both_spellings({"status": {"reservedFor": {}}})


def _without_nulls(data: Any, nesting: _Nesting | None = None) -> Any:
    if not isinstance(data, Mapping):
        return data
    kept = {key: value for key, value in data.items() if value is not None}
    if not nesting:
        return kept
    for key, inner in nesting.items():
        value = kept.get(key)
        if value is None:
            continue
        if isinstance(value, list | tuple):
            kept[key] = [_without_nulls(entry, inner) for entry in value]
        else:
            kept[key] = _without_nulls(value, inner)
    return kept


class PodStatus(pods.PodStatus):
    phase: str = ""


class Pod(pods.Pod):
    status: PodStatus = PodStatus()

    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        return _without_nulls(data, _POD_NESTING)


class ExactDeviceRequest(_Projection):
    admin_access: bool | None = None


class DeviceRequest(_Projection):
    name: str = ""
    exactly: ExactDeviceRequest | None = None


class DeviceClaim(_Projection):
    requests: tuple[DeviceRequest, ...] = ()


class ResourceClaimSpec(_Projection):
    devices: DeviceClaim = DeviceClaim()

    @property
    def asks_for_admin_access(self) -> bool:
        """D6: ``firstAvailable`` subrequests cannot ask for admin access, so only ``exactly`` counts."""
        return any(
            request.exactly is not None and request.exactly.admin_access for request in self.devices.requests
        )


class ResourceClaimStatus(claims.ResourceClaimStatus[bool]):
    # Only the presence of the allocation matters, so its content is not kept.
    allocation: bool = False

    @field_validator("allocation", mode="before")
    @classmethod
    def _present(cls, allocation: Any) -> bool:
        return allocation is not None


class ClaimMeta(LeanMeta):
    """Only the annotations the operator reads: the pod claim name, and the extended-resource marker."""

    creation_timestamp: str | None = None
    resource_version: str = ""
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("annotations", mode="before")
    @classmethod
    def _read_annotations_only(cls, annotations: Any) -> Any:
        if not isinstance(annotations, Mapping):
            return annotations
        return {key: annotations[key] for key in READ_ANNOTATIONS if key in annotations}


class ResourceClaim(claims.ResourceClaim[bool]):
    metadata: ClaimMeta
    # Of the spec only whether it asks for admin access is read (a metric label); keeping the
    # parsed requests would cost four models per cached claim.
    admin_access: bool = False
    status: ResourceClaimStatus = ResourceClaimStatus()
    raw_json: str = Field(default="{}", exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _summarise_spec(cls, data: Any) -> Any:
        data = _without_nulls(data, _CLAIM_NESTING)
        if isinstance(data, Mapping) and "spec" in data and "admin_access" not in data:
            spec = ResourceClaimSpec.model_validate(data["spec"] or {})
            data = {**data, "admin_access": spec.asks_for_admin_access}
        return data

    @property
    def body(self) -> dict[str, Any]:
        """A fresh copy of the raw object without ``managedFields``: the base of every full-object write."""
        parsed: dict[str, Any] = wirejson.loads(self.raw_json)
        return parsed

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ResourceClaim:
        claim = cls.model_validate(body)
        metadata = body.get("metadata")
        if isinstance(metadata, Mapping) and "managedFields" in metadata:
            # Omitting managedFields in an update leaves them unchanged on the server, and
            # they are by far the largest part of a cached object.
            body = {**body, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
        return claim.model_copy(update={"raw_json": wirejson.dumps(body)})

    @property
    def is_allocated(self) -> bool:
        return self.status.allocation


class TemplateObjectMeta(_Projection):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceClaimTemplateSpec(_Projection):
    metadata: TemplateObjectMeta = TemplateObjectMeta()
    spec: dict[str, Any] = Field(default_factory=dict)
    """Copied verbatim into generated claims, so it is kept raw."""

    @functools.cached_property
    def claim_spec(self) -> ResourceClaimSpec:
        """The spec as a claim's, parsed once per template version (for the admin-access label
        of every claim generated from it)."""
        return ResourceClaimSpec.model_validate(self.spec)

    @functools.cached_property
    def spec_json(self) -> str:
        """The spec serialised once: parsing it gives every generated claim a copy of its own
        several times faster than a deep copy of the dict (one per claim in a burst)."""
        return wirejson.dumps(self.spec)


class ResourceClaimTemplate(_Projection):
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = ResourceClaimTemplateSpec()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
