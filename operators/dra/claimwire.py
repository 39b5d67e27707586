"""A ResourceClaim's release written in protobuf, for the claims JSON cannot write back.

The release of a claim (spec section 8) changes three things and nothing else: the finalizers,
``status.reservedFor`` and whether ``status.allocation`` is there. :func:`written_as` makes those
three changes, as a JSON body built for the same write states them, to the claim's protobuf
message; every other byte, the spec's raw parameters included, stays as kube-apiserver stored it
(see :mod:`operators.core.protowire` for why that matters). Field numbers are those of
``k8s.io/api/resource/v1/generated.proto`` and ``k8s.io/apimachinery/pkg/apis/meta/v1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.core import protowire

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceClaim"

# ResourceClaim
_METADATA, _STATUS = 1, 3
# ObjectMeta
_RESOURCE_VERSION, _FINALIZERS = 6, 14
# ResourceClaimStatus
_ALLOCATION, _RESERVED_FOR = 1, 2
# ResourceClaimConsumerReference
_CONSUMER_API_GROUP, _CONSUMER_RESOURCE, _CONSUMER_NAME, _CONSUMER_UID = 1, 3, 4, 5


class StaleClaim(Exception):
    """The stored claim is not the version the intended write was computed from."""


def refused_as_changed(error_body: Mapping[str, Any]) -> bool:
    """Whether kube-apiserver refused a JSON write of a claim because the spec or the allocation
    it sent back differ from the stored ones: the sign of raw parameters JSON cannot reproduce."""
    causes = (error_body.get("details") or {}).get("causes") or []
    return error_body.get("reason") == "Invalid" and any(
        (cause.get("field"), cause.get("reason")) in _CHANGED
        for cause in causes
        if isinstance(cause, Mapping)
    )


# (field, cause reason) of kube-apiserver's "spec: field is immutable" and "status.allocation:
# field cannot be modified once set".
_CHANGED = {("spec", "FieldValueInvalid"), ("status.allocation", "FieldValueInvalid")}


def resource_version(claim: bytes) -> str:
    metadata = protowire.values(claim, _METADATA)
    return protowire.text(metadata[-1], _RESOURCE_VERSION) if metadata else ""


def written_as(claim: bytes, intended: Mapping[str, Any]) -> bytes:
    """``claim`` (a ResourceClaim message) with the finalizers, consumers and presence of an
    allocation of ``intended`` (the JSON body of the same write, based on the same version)."""
    metadata = intended.get("metadata") or {}
    status = intended.get("status") or {}
    if resource_version(claim) != str(metadata.get("resourceVersion") or ""):
        raise StaleClaim(
            f"stored version {resource_version(claim)}, write based on {metadata.get('resourceVersion')}"
        )
    finalizers = [str(name).encode() for name in metadata.get("finalizers") or []]
    claim = protowire.edited(claim, _METADATA, lambda meta: protowire.replaced(meta, _FINALIZERS, finalizers))
    return protowire.edited(claim, _STATUS, lambda stored: _status_as(stored, status))


def _status_as(stored: bytes, intended: Mapping[str, Any]) -> bytes:
    if intended.get("allocation") is None:
        stored = protowire.replaced(stored, _ALLOCATION, [])
    elif not protowire.values(stored, _ALLOCATION):
        raise StaleClaim("the write keeps an allocation the stored claim does not have")
    kept = {protowire.text(entry, _CONSUMER_UID): entry for entry in protowire.values(stored, _RESERVED_FOR)}
    consumers = [
        kept.get(str(entry.get("uid") or "")) or _consumer(entry)
        for entry in intended.get("reservedFor") or []
    ]
    return protowire.replaced(stored, _RESERVED_FOR, consumers)


def _consumer(entry: Mapping[str, Any]) -> bytes:
    fields = [
        (_CONSUMER_API_GROUP, entry.get("apiGroup")),
        (_CONSUMER_RESOURCE, entry.get("resource")),
        (_CONSUMER_NAME, entry.get("name")),
        (_CONSUMER_UID, entry.get("uid")),
    ]
    return protowire.encode(
        protowire.string_field(number, str(value)) for number, value in fields if value is not None
    )
