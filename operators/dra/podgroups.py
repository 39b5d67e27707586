"""The PodGroup (``scheduling.k8s.io``) as DRA sees it: a consumer of shared claims.

Kubernetes 1.36 and 1.37 let a group of pods share ResourceClaims (KEP-5729, gates
``GenericWorkload`` and ``DRAWorkloadResourceClaims``): 1.36 serves such PodGroups as ``v1alpha2``
(alpha gates), 1.37 as ``v1beta1`` (beta gates, off by default); either version needs
``--runtime-config``. 1.35's ``v1alpha1`` PodGroup has no claims and is not read. The fields read
and written here are named and shaped alike in both versions, so one projection serves both;
only the ``apiVersion`` written (owner references, the status apply, Events) follows the served
version. A pod joins a group through ``spec.schedulingGroup.podGroupName``; the group lists its
claims in ``spec.resourceClaims`` (by name or from a template, at most four, immutable) and
records the names of the claims generated for it in ``status.resourceClaimStatuses``.
kube-scheduler reserves a group claim for the group itself, so ``status.reservedFor`` names the
PodGroup, never its members.

A pod entry stands for the group's claim only when the group has an entry of the same name that
names the same claim or the same template; any other entry of a member is the member's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import Field

from operators.core.models import KubeModel, LeanObject, NoneAsEmpty, OwnerReference, controller_of
from operators.core.resources import ApiResource
from operators.core.settings import InTreeReplacementSettings, SurfaceMode

from .claims import ConsumerReference
from .pods import PodResourceClaim

SCHEDULING_GROUP = "scheduling.k8s.io"
POD_GROUP_VERSIONS = ("v1beta1", "v1alpha2")
"""Newest first: an operator reads PodGroups in the first one the cluster serves. They are the
versions kube-controller-manager and kube-scheduler read PodGroups in, 1.37 and 1.36 respectively
(1.37 also has ``v1alpha3``, which neither of its components reads)."""

POD_GROUPS = ApiResource(SCHEDULING_GROUP, POD_GROUP_VERSIONS[0], "podgroups")
"""The newest version, until discovery says which one is served."""


class PodGroupResourceClaim(KubeModel):
    """One ``spec.resourceClaims[]`` entry of a PodGroup; exactly one of the two names is set."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupResourceClaimStatus(KubeModel):
    """One ``status.resourceClaimStatuses[]`` entry; no claim name means "not needed"."""

    name: str
    resource_claim_name: str | None = None


class PodGroupSpec(KubeModel):
    resource_claims: Annotated[tuple[PodGroupResourceClaim, ...], NoneAsEmpty] = ()


class PodGroupStatus(KubeModel):
    resource_claim_statuses: Annotated[tuple[PodGroupResourceClaimStatus, ...], NoneAsEmpty] = ()


class PodGroup(LeanObject):
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()

    def entry(self, name: str) -> PodGroupResourceClaim | None:
        # A scan, not an index: the API caps a group's entries at four (+k8s:maxItems=4 on every
        # served version), so a member with thousands of entries still costs linear time.
        for entry in self.spec.resource_claims:
            if entry.name == name:
                return entry
        return None

    def shares(self, pod_entry: PodResourceClaim) -> bool:
        """Whether a member's entry stands for this group's claim: the same name, and the same
        claim or template (upstream's ``BindTo``); otherwise it is the member's own claim."""
        entry = self.entry(pod_entry.name)
        return (
            entry is not None
            and entry.resource_claim_name == pod_entry.resource_claim_name
            and entry.resource_claim_template_name == pod_entry.resource_claim_template_name
        )


class WorkloadClaimsSettings(InTreeReplacementSettings):
    """The option of the replacements whose objects PodGroup claims change (resourceclaim, devicetaint)."""

    workload_claims: SurfaceMode = Field(
        "auto",
        description="ResourceClaims of PodGroups (scheduling.k8s.io v1beta1 on 1.37, v1alpha2 on 1.36; "
        "gates GenericWorkload and DRAWorkloadResourceClaims): auto = when discovery serves podgroups; "
        "on = required (not ready while it is not served); off = never, as without those gates: "
        "resourceclaim gives members claims of their own, devicetaint evicts no member for a claim "
        "reserved for its group.",
    )


WORKLOAD_CLAIMS_NOT_SERVED = (
    f"--workload-claims=on, but {SCHEDULING_GROUP} serves podgroups in none of "
    f"{', '.join(POD_GROUP_VERSIONS)}; not ready"
)
"""What an operator logs when :func:`workload_claims_on` says it is not ready."""


def workload_claims_on(mode: SurfaceMode, served: bool) -> bool | None:
    """Whether PodGroup claims are on, by ``--workload-claims`` and discovery; None: not ready
    (``on``, but PodGroups are not served; the operator logs :data:`WORKLOAD_CLAIMS_NOT_SERVED`)."""
    if mode == "on" and not served:
        return None
    return mode != "off" and served


def is_pod_group_consumer(consumer: ConsumerReference) -> bool:
    return consumer.api_group == SCHEDULING_GROUP and consumer.resource == POD_GROUPS.plural


def reserved_for_group_of(pod_group_name: str, consumer: ConsumerReference) -> bool:
    """Whether ``consumer`` is the PodGroup of that name: a member knows its group by name only."""
    return bool(pod_group_name) and is_pod_group_consumer(consumer) and consumer.name == pod_group_name


def controlled_by_group_of(pod_group_name: str, owners: Iterable[OwnerReference]) -> bool:
    """Whether the controller of an object (a claim) is the PodGroup of that name, in any version."""
    controller = controller_of(owners)
    return (
        bool(pod_group_name)
        and controller is not None
        and controller.name == pod_group_name
        and is_pod_group_reference(controller)
    )


def is_pod_group_reference(owner: OwnerReference) -> bool:
    """An owner reference to a PodGroup of any served version, as upstream's owner index reads it."""
    return owner.is_a(SCHEDULING_GROUP, "PodGroup")


def pod_group_consumer(group: PodGroup) -> dict[str, str]:
    """The ``reservedFor`` entry of a claim reserved for the whole group."""
    return {"apiGroup": SCHEDULING_GROUP, "resource": POD_GROUPS.plural, "name": group.name, "uid": group.uid}


def pod_group_owner(group: PodGroup, api_version: str) -> dict[str, object]:
    """The controller reference of a claim generated for the group, in the served ``api_version``
    (readers ignore the version, :func:`is_pod_group_reference`); no ``blockOwnerDeletion``, as
    upstream, so that no ``podgroups/finalizers`` permission is needed."""
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "name": group.name,
        "uid": group.uid,
        "controller": True,
    }
