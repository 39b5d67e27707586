"""The definitions D1-D6 of the spec (section 4) and the routing of pod events (section 5).

Everything here is a pure function of typed projections. Claim lookups are passed in as a
callable so that the routing can run against the watch cache without importing it.

Predicates that explain a decision return ``(bool, reason)``: the reason is only for logs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from operators.core.keys import CLAIM, POD, Key
from operators.core.models import OwnerReference
from operators.dra.claims import ConsumerReference
from operators.dra.podgroups import (
    PodGroup,
    PodGroupResourceClaim,
    is_pod_group_consumer,
    is_pod_group_reference,
    pod_group_consumer,
)
from operators.dra.pods import TERMINAL_PHASES, PodResourceClaim

from .models import Pod, ResourceClaim, ResourceClaimSpec

ClaimLookup = Callable[[str, str], ResourceClaim | None]
"""``(namespace, name) -> claim or None``: how routing and syncs read the claim cache."""

PodGroupLookup = Callable[[str, str], PodGroup | None]
"""``(namespace, name) -> PodGroup or None``; absent (None) where PodGroup claims are off."""

POD_GROUP = "podgroup"
"""The work-queue kind of a PodGroup; pods and claims are :data:`~operators.core.keys.POD` and
:data:`~operators.core.keys.CLAIM`."""


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
    """D1: which claim a pod claim entry stands for.

    Reads all the statuses on every call: to resolve all of a pod's entries use
    :func:`resolve_entries`, which reads them once.
    """
    return _resolve(entry, _recorded_by_name(pod.status.resource_claim_statuses).get)


def resolve_entries(pod: Pod) -> Iterator[tuple[PodResourceClaim, Resolution]]:
    """D1 for every entry of the pod, in entry order."""
    return _resolve_all(pod.spec.resource_claims, pod.status.resource_claim_statuses)


def resolve_group_entry(group: PodGroup, entry: PodGroupResourceClaim) -> Resolution:
    """D1 for a PodGroup's entry: the group records the names of its generated claims as a pod does."""
    return _resolve(entry, _recorded_by_name(group.status.resource_claim_statuses).get)


def resolve_group_entries(group: PodGroup) -> Iterator[tuple[PodGroupResourceClaim, Resolution]]:
    """D1 for every entry of the PodGroup, in entry order."""
    return _resolve_all(group.spec.resource_claims, group.status.resource_claim_statuses)


class _Recorded(Protocol):
    """A ``status.resourceClaimStatuses[]`` entry, of a pod or a PodGroup."""

    @property
    def name(self) -> str: ...

    @property
    def resource_claim_name(self) -> str | None: ...


class _Entry(_Recorded, Protocol):
    """A ``spec.resourceClaims[]`` entry, of a pod or a PodGroup."""

    @property
    def resource_claim_template_name(self) -> str | None: ...


_EntryT = TypeVar("_EntryT", bound=_Entry)


def _resolve(entry: _Entry, recorded_for: Callable[[str], _Recorded | None]) -> Resolution:
    """``recorded_for``: the status entry of an entry name, or None; only template entries ask."""
    if entry.resource_claim_name is not None:
        return Resolution(Resolved.NAMED, entry.resource_claim_name)
    if entry.resource_claim_template_name is not None:
        status = recorded_for(entry.name)
        if status is None:
            return Resolution(Resolved.NOT_CREATED)
        if status.resource_claim_name is None:
            return Resolution(Resolved.SKIPPED)
        return Resolution(Resolved.NAMED, status.resource_claim_name, check_owner=True)
    return Resolution(Resolved.UNSUPPORTED)


def _resolve_all(
    entries: Iterable[_EntryT], recorded: Iterable[_Recorded]
) -> Iterator[tuple[_EntryT, Resolution]]:
    # A tenant sets the number of entries: scanning the statuses for each would make every pod
    # event quadratic in it, long enough to starve the event loop and its probes.
    by_name = _recorded_by_name(recorded)
    for entry in entries:
        yield entry, _resolve(entry, by_name.get)


def _recorded_by_name(recorded: Iterable[_Recorded]) -> dict[str, _Recorded]:
    """The status entry of each name; of duplicates the first, as upstream's reading of the status."""
    by_name: dict[str, _Recorded] = {}
    for status in recorded:
        by_name.setdefault(status.name, status)
    return by_name


def not_created_message(pod: Pod) -> str:
    return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'


def unsupported_message(pod: Pod, entry: PodResourceClaim) -> str:
    return (
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{entry.name}": '
        "none of the supported fields are set"
    )


def group_unsupported_message(group: PodGroup, entry: PodGroupResourceClaim) -> str:
    # Unlike the pod's, upstream's text quotes neither the group nor the entry.
    return (
        f"PodGroup {group.namespace}/{group.name}, spec.resourceClaim {entry.name}: "
        "none of the supported fields are set"
    )


def resolved_claim_names(pod: Pod) -> Iterator[str]:
    """Every claim name the pod's entries resolve to (D1), in entry order, repeats included."""
    for _, resolution in resolve_entries(pod):
        if resolution.outcome is Resolved.NAMED:
            yield resolution.claim_name


def resolved_group_claim_names(group: PodGroup) -> Iterator[str]:
    for _, resolution in resolve_group_entries(group):
        if resolution.outcome is Resolved.NAMED:
            yield resolution.claim_name


def is_controlled_by_pod(claim: ResourceClaim, pod: Pod) -> bool:
    """D2."""
    controller = claim.metadata.controller
    return claim.namespace == pod.namespace and controller is not None and controller.uid == pod.uid


def is_controlled_by_group(claim: ResourceClaim, group: PodGroup) -> bool:
    controller = claim.metadata.controller
    return (
        claim.namespace == group.namespace
        and controller is not None
        and is_pod_group_reference(controller)
        and controller.uid == group.uid
    )


def is_for_pod(claim: ResourceClaim, pod: Pod, group: PodGroup | None) -> bool:
    """D2 with PodGroup claims: the pod's own claim, or one its group controls.

    ``group`` is the pod's PodGroup where PodGroup claims are on, else None. Upstream accepts
    a PodGroup owner by name alone (the pod does not know the group's UID); with the group at
    hand the UID is checked too, so a member of a re-created group moves to the new group's
    claim instead of keeping the old group's until the garbage collector takes it.
    """
    if is_controlled_by_pod(claim, pod):
        return True
    return group is not None and is_controlled_by_group(claim, group)


def is_pod_done(pod: Pod) -> bool:
    """D3, for a pod still in the API; a removed pod is done as well."""
    if pod.status.phase in TERMINAL_PHASES:
        return True
    return pod.metadata.deletion_timestamp is not None and not pod.spec.node_name


def is_reserved_for_pod(claim: ResourceClaim, pod_uid: str, group: PodGroup | None = None) -> bool:
    """D4: any entry with the pod's UID counts, whatever its kind, as upstream; with PodGroup
    claims on, so does the entry of the pod's group."""
    for consumer in claim.status.reserved_for:
        if consumer.uid == pod_uid:
            return True
        if group is not None and is_pod_group_consumer(consumer) and consumer.uid == group.uid:
            return True
    return False


def consumer_for(pod: Pod, group: PodGroup | None, entry: PodResourceClaim) -> dict[str, str]:
    """The ``reservedFor`` entry a pod's claim is reserved with (upstream's ``BindTo``): the group
    for an entry the group shares, the pod otherwise."""
    if group is not None and group.shares(entry):
        return pod_group_consumer(group)
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def is_pod_consumer(consumer: ConsumerReference) -> bool:
    """D5: besides pods, only PodGroups (where PodGroup claims are on) are known consumers;
    other kinds belong to another component and are never touched."""
    return consumer.is_pod


def admin_access_label(spec: ResourceClaimSpec) -> str:
    return "true" if spec.asks_for_admin_access else "false"


def pod_group_controller(claim: ResourceClaim) -> OwnerReference | None:
    """The controlling PodGroup of a claim: where PodGroup claims are off, a member cannot use it."""
    controller = claim.metadata.controller
    if controller is None or not is_pod_group_reference(controller):
        return None
    return controller


def owning_pod(claim: ResourceClaim) -> OwnerReference | None:
    """The controlling owner reference if it is a ``v1`` Pod (section 8, step 5)."""
    controller = claim.metadata.controller
    if controller is None or controller.api_version != "v1" or controller.kind != "Pod":
        return None
    return controller


def generating_owner(claim: ResourceClaim) -> OwnerReference | None:
    """The pod or PodGroup a claim may have been generated for: its controlling reference."""
    return owning_pod(claim) or pod_group_controller(claim)


def pod_has_claims(pod: Pod) -> bool:
    """Pods without any claim need nothing from this operator."""
    return bool(pod.spec.resource_claims) or pod.status.extended_resource_claim_status is not None


def pod_needs_work(
    pod: Pod, lookup_claim: ClaimLookup, lookup_group: PodGroupLookup | None = None
) -> tuple[bool, str]:
    """Whether the ``pod`` sync has something to do (section 5, step 4)."""
    if pod.metadata.deletion_timestamp is not None:
        return False, "pod is being deleted"
    if pod.status.phase in TERMINAL_PHASES:
        # Unlike upstream: a finished pod gets no new claims and no reservations (section 14, row 3).
        return False, "pod has terminated"
    group = None
    if lookup_group is not None and pod.pod_group_name:
        group = lookup_group(pod.namespace, pod.pod_group_name)
        if group is None:
            # The group's arrival routes its members again; until then nothing can be decided.
            return False, f"waiting for PodGroup {pod.pod_group_name}"
    for entry, resolution in resolve_entries(pod):
        if (unnamed := _unnamed_work(resolution, entry.name)) is not None:
            return True, unnamed
        if resolution.outcome is Resolved.SKIPPED:
            continue
        claim = lookup_claim(pod.namespace, resolution.claim_name)
        if claim is None:
            if group is not None and group.shares(entry):
                # The group re-creates it, and that routes the members again.
                continue
            if entry.resource_claim_template_name is not None:
                return True, f"claim {resolution.claim_name} must be re-created"
            continue
        if resolution.check_owner and not is_for_pod(claim, pod, group):
            continue
        if pod.spec.node_name and claim.is_allocated and not is_reserved_for_pod(claim, pod.uid, group):
            return True, f"claim {resolution.claim_name} must be reserved"
    return False, "nothing to do for any claim"


def _unnamed_work(resolution: Resolution, entry_name: str) -> str | None:
    """Why an entry that names no claim yet needs a sync, for pods and PodGroups alike."""
    if resolution.outcome is Resolved.NOT_CREATED:
        return f"claim {entry_name} must be created"
    if resolution.outcome is Resolved.UNSUPPORTED:
        return f"claim {entry_name} is unsupported"
    return None


def pod_group_needs_work(group: PodGroup, lookup_claim: ClaimLookup) -> tuple[bool, str]:
    """Whether the PodGroup sync has something to do: a template entry without its claim.

    Nothing is reserved from the group's side: members (or kube-scheduler) reserve for it.
    """
    if group.metadata.deletion_timestamp is not None:
        return False, "PodGroup is being deleted"
    for entry, resolution in resolve_group_entries(group):
        if (unnamed := _unnamed_work(resolution, entry.name)) is not None:
            return True, unnamed
        if resolution.outcome is Resolved.SKIPPED:
            continue
        if lookup_claim(group.namespace, resolution.claim_name) is None and resolution.check_owner:
            return True, f"claim {resolution.claim_name} must be re-created"
    return False, "nothing to do for any claim"


def route_pod_group(group: PodGroup, *, removed: bool, lookup_claim: ClaimLookup) -> list[Key]:
    """The work keys of a PodGroup event, its members apart: a removed group's claims are
    released; a group missing a generated claim is synced."""
    if not group.spec.resource_claims:
        return []
    if removed:
        names = dict.fromkeys(resolved_group_claim_names(group))
        return [Key(CLAIM, group.namespace, name) for name in names]
    if pod_group_needs_work(group, lookup_claim)[0]:
        return [Key(POD_GROUP, group.namespace, group.name)]
    return []


def route_pod(
    pod: Pod, *, removed: bool, lookup_claim: ClaimLookup, lookup_group: PodGroupLookup | None = None
) -> list[Key]:
    """The work keys a pod event causes (section 5, steps 1, 3 and 4).

    ``removed`` is true for a DELETED event. Remembering the UID of a removed pod is the
    cache's business, not this function's.
    """
    if not pod_has_claims(pod):
        return []
    keys: list[Key] = []
    if removed or is_pod_done(pod):
        names = list(resolved_claim_names(pod))
        if pod.extended_claim_name:
            names.append(pod.extended_claim_name)
        keys.extend(Key(CLAIM, pod.namespace, name) for name in dict.fromkeys(names))
    if not removed and pod_needs_work(pod, lookup_claim, lookup_group)[0]:
        keys.append(Key(POD, pod.namespace, pod.name))
    return keys
