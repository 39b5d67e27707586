"""The definitions D1-D6 of the spec (section 4) and the routing of pod events (section 5).

Everything here is a pure function of typed projections. Claim lookups are passed in as a
callable so that the routing can run against the watch cache without importing it.

Predicates that explain a decision return ``(bool, reason)``: the reason is only for logs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from operators.core.models import OwnerReference
from operators.dra.claims import ConsumerReference
from operators.dra.pods import PodResourceClaim

from .constants import SCHEDULING_API_GROUP, TERMINAL_POD_PHASES
from .models import Pod, ResourceClaim, ResourceClaimSpec

ClaimLookup = Callable[[str, str], ResourceClaim | None]
"""``(namespace, name) -> claim or None``: how routing and syncs read the claim cache."""

POD_KEY_PREFIX = "pod:"
CLAIM_KEY_PREFIX = "claim:"


def pod_key(namespace: str, name: str) -> str:
    return f"{POD_KEY_PREFIX}{namespace}/{name}"


def claim_key(namespace: str, name: str) -> str:
    return f"{CLAIM_KEY_PREFIX}{namespace}/{name}"


def split_key(key: str) -> tuple[str, str, str]:
    """``"pod:ns/name"`` -> ``("pod", "ns", "name")``; raises ValueError on anything else."""
    kind, sep, rest = key.partition(":")
    namespace, slash, name = rest.partition("/")
    if not sep or not slash or kind not in ("pod", "claim") or not namespace or not name:
        raise ValueError(f"not a resourceclaim work key: {key!r}")
    return kind, namespace, name


class Resolved(enum.Enum):
    NAMED = "named"
    SKIPPED = "skipped"
    """The status records that the claim is not needed."""
    NOT_CREATED = "not created yet"
    UNSUPPORTED = "unsupported"
    """Neither field is set: only a future API field could produce this."""


@dataclass(frozen=True)
class Resolution:
    outcome: Resolved
    claim_name: str = ""
    check_owner: bool = False
    """True for template entries: the named claim must be controlled by the pod (D2)."""


def resolve_entry(pod: Pod, entry: PodResourceClaim) -> Resolution:
    """D1: which claim a pod claim entry stands for."""
    if entry.resource_claim_name is not None:
        return Resolution(Resolved.NAMED, entry.resource_claim_name)
    if entry.resource_claim_template_name is not None:
        for status in pod.status.resource_claim_statuses:
            if status.name == entry.name:
                if status.resource_claim_name is None:
                    return Resolution(Resolved.SKIPPED)
                return Resolution(Resolved.NAMED, status.resource_claim_name, check_owner=True)
        return Resolution(Resolved.NOT_CREATED)
    return Resolution(Resolved.UNSUPPORTED)


def not_created_message(pod: Pod) -> str:
    return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'


def unsupported_message(pod: Pod, entry: PodResourceClaim) -> str:
    return (
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{entry.name}": '
        "none of the supported fields are set"
    )


def resolved_claim_names(pod: Pod) -> Iterator[str]:
    """Every claim name the pod's entries resolve to (D1), in entry order, repeats included."""
    for entry in pod.spec.resource_claims:
        resolution = resolve_entry(pod, entry)
        if resolution.outcome is Resolved.NAMED:
            yield resolution.claim_name


def is_controlled_by_pod(claim: ResourceClaim, pod: Pod) -> bool:
    """D2."""
    controller = claim.controller
    return claim.namespace == pod.namespace and controller is not None and controller.uid == pod.uid


def is_pod_done(pod: Pod) -> bool:
    """D3, for a pod still in the API; a removed pod is done as well."""
    if pod.status.phase in TERMINAL_POD_PHASES:
        return True
    return pod.metadata.deletion_timestamp is not None and not pod.spec.node_name


def is_reserved_for_pod(claim: ResourceClaim, pod_uid: str) -> bool:
    """D4: any entry counts, whatever its kind, as upstream."""
    return any(consumer.uid == pod_uid for consumer in claim.status.reserved_for)


def is_pod_consumer(consumer: ConsumerReference) -> bool:
    """D5: other entries are unknown kinds that another component owns; never touched."""
    return consumer.is_pod


def admin_access_label(spec: ResourceClaimSpec) -> str:
    return "true" if spec.asks_for_admin_access else "false"


def pod_group_controller(claim: ResourceClaim) -> OwnerReference | None:
    """The controlling PodGroup of a claim, which this operator does not support yet."""
    controller = claim.controller
    if controller is None or controller.kind != "PodGroup":
        return None
    if not controller.api_version.startswith(SCHEDULING_API_GROUP + "/"):
        return None
    return controller


def owning_pod(claim: ResourceClaim) -> OwnerReference | None:
    """The controlling owner reference if it is a ``v1`` Pod (section 8, step 5)."""
    controller = claim.controller
    if controller is None or controller.api_version != "v1" or controller.kind != "Pod":
        return None
    return controller


def pod_has_claims(pod: Pod) -> bool:
    """Pods without any claim need nothing from this operator."""
    return bool(pod.spec.resource_claims) or pod.status.extended_resource_claim_status is not None


def pod_needs_work(pod: Pod, lookup_claim: ClaimLookup) -> tuple[bool, str]:
    """Whether the ``pod:`` sync has something to do (section 5, step 4)."""
    if pod.metadata.deletion_timestamp is not None:
        return False, "pod is being deleted"
    if pod.status.phase in TERMINAL_POD_PHASES:
        # Unlike upstream: a finished pod gets no new claims and no reservations (section 14, row 3).
        return False, "pod has terminated"
    for entry in pod.spec.resource_claims:
        resolution = resolve_entry(pod, entry)
        if resolution.outcome is Resolved.NOT_CREATED:
            return True, f"claim {entry.name} must be created"
        if resolution.outcome is Resolved.UNSUPPORTED:
            return True, f"claim {entry.name} is unsupported"
        if resolution.outcome is Resolved.SKIPPED:
            continue
        claim = lookup_claim(pod.namespace, resolution.claim_name)
        if claim is None:
            if entry.resource_claim_template_name is not None:
                return True, f"claim {resolution.claim_name} must be re-created"
            continue
        if resolution.check_owner and not is_controlled_by_pod(claim, pod):
            continue
        if pod.spec.node_name and claim.is_allocated and not is_reserved_for_pod(claim, pod.uid):
            return True, f"claim {resolution.claim_name} must be reserved"
    return False, "nothing to do for any claim"


def route_pod(pod: Pod, *, removed: bool, lookup_claim: ClaimLookup) -> list[str]:
    """The work keys a pod event causes (section 5, steps 1, 3 and 4).

    ``removed`` is true for a DELETED event. Remembering the UID of a removed pod is the
    cache's business, not this function's.
    """
    if not pod_has_claims(pod):
        return []
    keys: list[str] = []
    if removed or is_pod_done(pod):
        names = list(resolved_claim_names(pod))
        if pod.extended_claim_name:
            names.append(pod.extended_claim_name)
        keys.extend(claim_key(pod.namespace, name) for name in dict.fromkeys(names))
    if not removed and pod_needs_work(pod, lookup_claim)[0]:
        keys.append(pod_key(pod.namespace, pod.name))
    return keys
