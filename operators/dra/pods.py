"""The Pod as the claim-reading operators see it, and what they ask of a raw pod before parsing one.

A pod references claims through ``spec.resourceClaims`` (by name or from a template), learns their
names in ``status.resourceClaimStatuses`` and, for extended resources, in
``status.extendedResourceClaimStatus``; it runs where ``spec.nodeName`` says. That much means the
same to every operator that watches Pods, so it is modelled here once. What only one operator reads
(resourceclaim's phase, devicetaint's ``DisruptionTarget`` condition) costs memory in every cached
pod, so that operator subclasses :class:`PodStatus` and names it in its own :class:`Pod`.

Most pods of a cluster use no DRA at all, and every operator that watches Pods receives each of
their events. A pod can reference a ResourceClaim only through ``spec.resourceClaims`` (immutable
once the pod exists) or through the claim kube-scheduler creates for extended resources, recorded
in ``status.extendedResourceClaimStatus``. A pod with neither, and not already in an operator's
cache, can be dropped before any projection is built: that is what keeps the cost of a plain-pod
event small and plain pods out of the caches (issue #23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

from operators.core.models import KubeModel, LeanObject, NoneAsEmpty

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""The phases of a pod whose containers will not run again: it needs its claims no more, and what
it reported of its devices is history. The phase is read by the operators that need it (the
module docstring says why :class:`PodStatus` leaves it out)."""


class PodResourceClaim(KubeModel):
    """One ``spec.resourceClaims[]`` entry: a claim by name, or one generated from a template."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(KubeModel):
    """One ``status.resourceClaimStatuses[]`` entry; no claim name means "not needed"."""

    name: str
    resource_claim_name: str | None = None


class PodExtendedResourceClaimStatus(KubeModel):
    resource_claim_name: str = ""


class PodSchedulingGroup(KubeModel):
    """A pod's ``spec.schedulingGroup`` (1.37, gate GenericWorkload): the union has one member."""

    pod_group_name: str | None = None


class PodSpec(KubeModel):
    node_name: str = ""
    resource_claims: Annotated[tuple[PodResourceClaim, ...], NoneAsEmpty] = ()
    scheduling_group: PodSchedulingGroup | None = None


class PodStatus(KubeModel):
    resource_claim_statuses: Annotated[tuple[PodResourceClaimStatus, ...], NoneAsEmpty] = ()
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None


class Pod(LeanObject):
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()

    @property
    def pod_group_name(self) -> str:
        """The PodGroup the pod is a member of, or ``""``."""
        group = self.spec.scheduling_group
        return (group.pod_group_name or "") if group is not None else ""

    @property
    def extended_claim_name(self) -> str:
        """Name of the claim kube-scheduler created for extended resources, or ``""``."""
        extended = self.status.extended_resource_claim_status
        return extended.resource_claim_name if extended is not None else ""


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
