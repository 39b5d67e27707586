"""What every operator that watches Pods asks of a raw pod before it parses one.

Most pods of a cluster use no DRA at all, and every operator that watches Pods receives each of
their events. A pod can reference a ResourceClaim only through ``spec.resourceClaims`` (immutable
once the pod exists) or through the claim kube-scheduler creates for extended resources, recorded
in ``status.extendedResourceClaimStatus``. A pod with neither, and not already in an operator's
cache, can be dropped before any projection is built: that is what keeps the cost of a plain-pod
event small and plain pods out of the caches (issue #23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def pod_may_use_claims(body: Mapping[str, Any]) -> bool:
    """False only when the raw pod certainly references no ResourceClaim; anything unexpected in
    its shape answers True, so that the operator's own parser sees it and reports it."""
    spec = body.get("spec")
    status = body.get("status")
    if spec is not None and not isinstance(spec, Mapping):
        return True
    if status is not None and not isinstance(status, Mapping):
        return True
    return (
        bool((spec or {}).get("resourceClaims"))
        or (status or {}).get("extendedResourceClaimStatus") is not None
    )


def pod_event_matters(body: Mapping[str, Any], cached: Callable[[str, str], object | None]) -> bool:
    """Whether a pod event needs parsing: the pod may reference a claim, or ``cached(namespace,
    name)`` finds it in the operator's cache (its deletion, or a replaced pod of that name)."""
    if pod_may_use_claims(body):
        return True
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return True
    return cached(str(metadata.get("namespace") or ""), str(metadata.get("name") or "")) is not None
