"""Request bodies of the operator's writes (spec sections 7.2, 7.4, 7.5 and 8).

Claim updates are full-object PUTs built from a cached or returned claim body: they carry
its ``resourceVersion``, so a concurrent change makes them fail with 409 instead of being
overwritten. Every function returns a fresh copy and never mutates its input, which may be
shared with the cache.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from operators.dra.api import GROUP, VERSION
from operators.dra.pods import PodResourceClaim

from .constants import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from .models import Pod, ResourceClaimTemplate
from .naming import claim_generate_name


def generated_claim(pod: Pod, entry: PodResourceClaim, template: ResourceClaimTemplate) -> dict[str, Any]:
    """The claim created for a template entry (7.2), and nothing else.

    No ``blockOwnerDeletion``: upstream dropped it in 1.35, and setting it would need the
    ``pods/finalizers`` permission.
    """
    annotations = dict(template.spec.metadata.annotations)
    # Ours wins: the duplicate check depends on it naming this entry.
    annotations[POD_CLAIM_NAME_ANNOTATION] = entry.name
    metadata: dict[str, Any] = {
        "generateName": claim_generate_name(pod.name, entry.name),
        "namespace": pod.namespace,
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
        ],
        "annotations": annotations,
    }
    if template.spec.metadata.labels:
        metadata["labels"] = dict(template.spec.metadata.labels)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": json.loads(template.spec.spec_json),
    }


def merged_claim_statuses(pod: Pod, new_mappings: Mapping[str, str]) -> list[dict[str, str]]:
    """Existing named entries overlaid with the new ones, sorted by entry name (7.4).

    Sending the whole list, not only the new entries, is what keeps the list of a pod with
    several template claims from flapping (kubernetes/kubernetes#138407).
    """
    merged = {
        status.name: status.resource_claim_name
        for status in pod.status.resource_claim_statuses
        if status.resource_claim_name is not None
    }
    merged.update(new_mappings)
    # Byte order, as Go's sort of strings; code-point order of str is the same for UTF-8.
    return [{"name": name, "resourceClaimName": merged[name]} for name in sorted(merged)]


def pod_status_apply(pod: Pod, new_mappings: Mapping[str, str]) -> dict[str, Any]:
    """The server-side apply body of ``pods/status``; ``metadata.uid`` guards against a
    same-name replacement pod."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "status": {"resourceClaimStatuses": merged_claim_statuses(pod, new_mappings)},
    }


def reserved_for_pod(claim_body: Mapping[str, Any], pod: Pod) -> dict[str, Any]:
    """The claim with the pod appended to ``status.reservedFor`` (7.5)."""
    body = copy.deepcopy(dict(claim_body))
    status = body.setdefault("status", {})
    reserved = list(status.get("reservedFor") or [])
    reserved.append({"resource": "pods", "name": pod.name, "uid": pod.uid})
    status["reservedFor"] = reserved
    return body


def with_reserved_for(
    claim_body: Mapping[str, Any], remaining: Iterable[Mapping[str, Any]], *, deallocate: bool
) -> dict[str, Any]:
    """The claim with ``status.reservedFor`` replaced, and the allocation cleared if asked (8.3)."""
    body = copy.deepcopy(dict(claim_body))
    status = body.setdefault("status", {})
    status["reservedFor"] = [copy.deepcopy(dict(entry)) for entry in remaining]
    if deallocate:
        status.pop("allocation", None)
    return body


def without_allocation(claim_body: Mapping[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(dict(claim_body))
    body.setdefault("status", {}).pop("allocation", None)
    return body


def without_delete_protection(claim_body: Mapping[str, Any]) -> dict[str, Any]:
    """The claim without our finalizer; other finalizers keep their order."""
    body = copy.deepcopy(dict(claim_body))
    metadata = body.setdefault("metadata", {})
    finalizers = metadata.get("finalizers") or []
    metadata["finalizers"] = [name for name in finalizers if name != DELETE_PROTECTION_FINALIZER]
    return body


def has_delete_protection(claim_body: Mapping[str, Any]) -> bool:
    metadata = claim_body.get("metadata") or {}
    return DELETE_PROTECTION_FINALIZER in (metadata.get("finalizers") or [])


def is_allocated(claim_body: Mapping[str, Any]) -> bool:
    status = claim_body.get("status") or {}
    return status.get("allocation") is not None
