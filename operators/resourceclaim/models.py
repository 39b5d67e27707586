"""Typed projections of the three kinds the operator watches (spec section 3).

Only the fields the operator reads are modelled; everything else is ignored on parsing.
Explicit JSON ``null`` values are treated like absent fields, because Go serialises some
empty pointers that way (``creationTimestamp: null`` inside templates, for example) and a
watch handler must never fail on such input.

A ResourceClaim also keeps its raw body (without ``managedFields``): section 8 writes
claims back with full-object PUTs carrying the cached ``resourceVersion``, and those must
preserve every field we do not model. It is kept as compact JSON text, a fraction of the
memory of the parsed object, and parsed again only for the rare write.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from operators.core.models import KubeModel, LeanMeta, ObjectMeta, OwnerReference

from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION

READ_ANNOTATIONS = (POD_CLAIM_NAME_ANNOTATION, EXTENDED_RESOURCE_CLAIM_ANNOTATION)


class _Projection(KubeModel):
    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


class PodClaimEntry(_Projection):
    """One ``spec.resourceClaims[]`` entry."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(_Projection):
    node_name: str = ""
    resource_claims: tuple[PodClaimEntry, ...] = ()


class PodClaimStatus(_Projection):
    """One ``status.resourceClaimStatuses[]`` entry; no claim name means "not needed"."""

    name: str
    resource_claim_name: str | None = None


class ExtendedResourceClaimStatus(_Projection):
    resource_claim_name: str = ""


class PodStatus(_Projection):
    phase: str = ""
    resource_claim_statuses: tuple[PodClaimStatus, ...] = ()
    extended_resource_claim_status: ExtendedResourceClaimStatus | None = None


class Pod(_Projection):
    metadata: LeanMeta
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def extended_claim_name(self) -> str:
        """Name of the claim kube-scheduler created for extended resources, or ``""``."""
        extended = self.status.extended_resource_claim_status
        return extended.resource_claim_name if extended is not None else ""


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


class ConsumerReference(_Projection):
    """One ``status.reservedFor[]`` entry."""

    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_Projection):
    # Only the presence of the allocation matters, so its content is not kept.
    allocation: bool = False
    reserved_for: tuple[ConsumerReference, ...] = ()

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


class ResourceClaim(_Projection):
    metadata: ClaimMeta
    # Of the spec only whether it asks for admin access is read (a metric label); keeping the
    # parsed requests would cost four models per cached claim.
    admin_access: bool = False
    status: ResourceClaimStatus = ResourceClaimStatus()
    raw_json: str = Field(default="{}", exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _summarise_spec(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "spec" in data and "admin_access" not in data:
            spec = ResourceClaimSpec.model_validate(data["spec"] or {})
            data = {**data, "admin_access": spec.asks_for_admin_access}
        return data

    @property
    def body(self) -> dict[str, Any]:
        """A fresh copy of the raw object without ``managedFields``: the base of every full-object write."""
        parsed: dict[str, Any] = json.loads(self.raw_json)
        return parsed

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ResourceClaim:
        claim = cls.model_validate(body)
        metadata = body.get("metadata")
        if isinstance(metadata, Mapping) and "managedFields" in metadata:
            # Omitting managedFields in an update leaves them unchanged on the server, and
            # they are by far the largest part of a cached object.
            body = {**body, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
        return claim.model_copy(update={"raw_json": json.dumps(body, separators=(",", ":"))})

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def is_allocated(self) -> bool:
        return self.status.allocation

    @property
    def controller(self) -> OwnerReference | None:
        """The owner reference with ``controller: true``; the API allows at most one."""
        for owner in self.metadata.owner_references:
            if owner.controller:
                return owner
        return None


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
        return json.dumps(self.spec, separators=(",", ":"))


class ResourceClaimTemplate(_Projection):
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = ResourceClaimTemplateSpec()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
