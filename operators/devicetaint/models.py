"""Typed projections of the objects the devicetaint operator watches, and its work items.

Only the fields of spec §4 are modelled, so the cache holds projections rather than whole objects:
labels, annotations, managed fields and most of the status are dropped at parse time. Pod conditions
are reduced to ``DisruptionTarget`` and rule conditions to ``EvictionInProgress`` for the same reason.
Pods, claims, slices and rules are the shared projections of :mod:`operators.dra`; what eviction alone
reads (the pod's condition, a result's tolerations) is added here, and the rule is narrowed that way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import field_validator

from operators.core.conditions import ObservedCondition
from operators.core.keys import POD, Key
from operators.core.models import KubeModel, LeanMeta, NoneAsEmpty, NoneAsEmptyMap
from operators.dra import claims, pods, slices, taintrules
from operators.dra.taintrules import EVICTION_IN_PROGRESS, EVICTIONS_PER_MINUTE

DISRUPTION_TARGET = "DisruptionTarget"


# --- Pod ---------------------------------------------------------------------------------------------


class PodCondition(KubeModel):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class PodStatus(pods.PodStatus):
    conditions: Annotated[tuple[PodCondition, ...], NoneAsEmpty] = ()

    @field_validator("conditions", mode="after")
    @classmethod
    def _keep_disruption_target(cls, conditions: tuple[PodCondition, ...]) -> tuple[PodCondition, ...]:
        return tuple(condition for condition in conditions if condition.type == DISRUPTION_TARGET)


class Pod(pods.Pod):
    status: PodStatus = PodStatus()

    @property
    def uses_claims(self) -> bool:
        """Whether the pod can reference a claim at all; other pods need not be cached."""
        return bool(self.spec.resource_claims) or bool(self.extended_claim_name)

    def claim_inputs(self) -> tuple[object, ...]:
        """The fields whose change makes a re-evaluation necessary (spec §8, Pod MODIFIED)."""
        extended = self.status.extended_resource_claim_status
        return (
            self.spec.node_name,
            self.status.resource_claim_statuses,
            extended.resource_claim_name if extended else None,
        )


# --- ResourceClaim -----------------------------------------------------------------------------------


AllocationResult = claims.AllocationResult[claims.ResultWithTolerations]


class ResourceClaim(claims.ResourceClaim[AllocationResult]):
    @property
    def results(self) -> tuple[claims.ResultWithTolerations, ...]:
        allocation = self.status.allocation
        return allocation.devices.results if allocation else ()

    def reserved_pod_names(self) -> set[str]:
        # PodGroup consumers are out of scope (spec §7).
        return {consumer.name for consumer in self.status.reserved_for if consumer.is_pod}


# --- ResourceSlice ---------------------------------------------------------------------------------

# A device's name and taints are all the eviction reads.
ResourceSlice = slices.ResourceSlice[slices.SliceDevice]


# --- DeviceTaintRule ---------------------------------------------------------------------------------


class RuleStatus(taintrules.RuleStatus):
    @field_validator("conditions", mode="after")
    @classmethod
    def _keep_eviction_in_progress(
        cls, conditions: tuple[ObservedCondition, ...]
    ) -> tuple[ObservedCondition, ...]:
        return tuple(condition for condition in conditions if condition.type == EVICTION_IN_PROGRESS)


class RuleMeta(LeanMeta):
    annotations: Annotated[Mapping[str, str], NoneAsEmptyMap] = {}

    @field_validator("annotations", mode="after")
    @classmethod
    def _keep_pacing(cls, annotations: Mapping[str, str]) -> Mapping[str, str]:
        # Only the pacing annotation is read; a user's others (last-applied configurations) cost memory.
        return {k: v for k, v in annotations.items() if k == EVICTIONS_PER_MINUTE}


class DeviceTaintRule(taintrules.DeviceTaintRule):
    metadata: RuleMeta
    status: RuleStatus = RuleStatus()

    @property
    def evictions_per_minute(self) -> str | None:
        """The pacing annotation as written, not yet validated (:mod:`.pacing`)."""
        return self.metadata.annotations.get(EVICTIONS_PER_MINUTE)


# --- Work items --------------------------------------------------------------------------------------


# Work-queue keys are core Keys of two kinds, each for one incarnation (the UID), so that the work of
# a deleted pod or rule is never done to a new one of the same name:
# - Key(POD, namespace, name, uid): check whether this pod instance must be evicted now;
# - Key(RULE, "", name, uid): check whether this rule instance's ``EvictionInProgress`` condition
#   must be written.
RULE = "rule"


def pod_key(pod: Pod) -> Key:
    return Key(POD, pod.metadata.namespace, pod.metadata.name, pod.metadata.uid)
