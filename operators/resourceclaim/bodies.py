"""Request bodies of the operator's writes (spec sections 7.2, 7.4, 7.5 and 8).

Claim updates are full-object PUTs built from a cached or returned claim body: they carry
its ``resourceVersion``, so a concurrent change makes them fail with 409 instead of being
overwritten. Every function returns a fresh copy and never mutates its input, which may be
shared with the cache.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from operators.core import wirejson
from operators.dra.api import GROUP, VERSION
from operators.dra.podgroups import PodGroup, PodGroupResourceClaimStatus
from operators.dra.pods import PodResourceClaimStatus

from .constants import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from .models import Pod, ResourceClaimTemplate
from .naming import claim_generate_name


def pod_owner(pod: Pod) -> dict[str, Any]:
    """The controller reference of a claim generated for a pod.

    No ``blockOwnerDeletion``: upstream dropped it in 1.35, and setting it would need the
    ``pods/finalizers`` permission.
    """
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}


def owner_labels(owner: Mapping[str, Any]) -> tuple[str, str]:
    """``(owner_api_group, owner_api_kind)`` of the create counter, from the claim's controller
    reference: the group is what precedes ``/`` in its apiVersion (``""`` for ``v1``)."""
    group, slash, _ = str(owner["apiVersion"]).partition("/")
    return (group if slash else ""), str(owner["kind"])


def generated_claim(
    owner: Mapping[str, Any], namespace: str, entry_name: str, template: ResourceClaimTemplate
) -> dict[str, Any]:
    """The claim created for a template entry of a pod or a PodGroup (7.2), and nothing else;
    ``owner`` is its controller reference (:func:`pod_owner`, or the PodGroup's)."""
    annotations = dict(template.spec.metadata.annotations)
    # Ours wins: the duplicate check depends on it naming this entry.
    annotations[POD_CLAIM_NAME_ANNOTATION] = entry_name
    metadata: dict[str, Any] = {
        "generateName": claim_generate_name(str(owner["name"]), entry_name),
        "namespace": namespace,
        "ownerReferences": [dict(owner)],
        "annotations": annotations,
    }
    if template.spec.metadata.labels:
        metadata["labels"] = dict(template.spec.metadata.labels)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": wirejson.loads(template.spec.spec_json),
    }


def merged_claim_statuses(
    recorded: Iterable[PodResourceClaimStatus | PodGroupResourceClaimStatus], new_mappings: Mapping[str, str]
) -> list[dict[str, str]]:
    """Existing named entries overlaid with the new ones, sorted by entry name (7.4).

    Sending the whole list, not only the new entries, is what keeps the list of a pod (or a
    PodGroup) with several template claims from flapping (kubernetes/kubernetes#138407; upstream's
    PodGroup status apply in 1.37.2 still sends only the new entries).
    """
    merged = {
        status.name: status.resource_claim_name
        for status in recorded
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
        "status": {
            "resourceClaimStatuses": merged_claim_statuses(pod.status.resource_claim_statuses, new_mappings)
        },
    }


def pod_group_status_apply(
    group: PodGroup, new_mappings: Mapping[str, str], api_version: str
) -> dict[str, Any]:
    """The server-side apply body of ``podgroups/status`` in the served ``api_version``, as the
    pod's: merged, sorted, and guarded by ``metadata.uid``."""
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": group.name, "namespace": group.namespace, "uid": group.uid},
        "status": {
            "resourceClaimStatuses": merged_claim_statuses(group.status.resource_claim_statuses, new_mappings)
        },
    }


def reserved_for(claim_body: Mapping[str, Any], consumer: Mapping[str, str]) -> dict[str, Any]:
    """The claim with the consumer (a pod, or a member's PodGroup) appended to
    ``status.reservedFor`` (7.5)."""
    body = copy.deepcopy(dict(claim_body))
    status = body.setdefault("status", {})
    reserved = list(status.get("reservedFor") or [])
    reserved.append(dict(consumer))
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
