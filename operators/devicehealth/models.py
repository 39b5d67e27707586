"""Typed projections of what the device-health operator reads, and its own resource.

``DeviceHealthPolicy`` (``dra-operators.io/v1alpha1``, cluster-scoped; docs/device-health.md)
turns the health that drivers and the kubelet report into DeviceTaintRules. Its ``spec.scope`` has
the shape of DeviceTaintSelector's ``deviceSelector`` and is evaluated by the same code
(:mod:`operators.dra.selection`).

Durations and ``maxUnavailable`` stay raw here: a bad value must reach the policy's condition as
a sentence (:mod:`.validation`), not fail the parse and leave the policy unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from operators.core import PROJECT_GROUP
from operators.core.models import KubeModel, LeanMeta, NoneAsEmpty, NoneAsEmptyMap, ObjectMeta
from operators.core.resources import ApiResource
from operators.dra import claims, health, taintrules
from operators.dra.pools import DeviceId
from operators.dra.selection import DeviceClass, DeviceSelection, ResourceSlice

__all__ = [
    "API_VERSION",
    "KIND",
    "PLURAL",
    "POLICIES",
    "VERSION",
    "Action",
    "AllocatedClaim",
    "DeviceClass",
    "DeviceId",
    "DeviceTaintRule",
    "HealthPolicy",
    "HealthPolicySpec",
    "KubeletSignal",
    "Pod",
    "ResourceSlice",
    "Signals",
    "SliceTaintSignal",
]

VERSION = health.POLICY_VERSION
API_VERSION = health.POLICY_API_VERSION
KIND = health.POLICY_KIND
PLURAL = "devicehealthpolicies"
POLICIES = ApiResource(PROJECT_GROUP, VERSION, PLURAL, namespaced=False)


# --- DeviceHealthPolicy -------------------------------------------------------------------------------


class SliceTaintSignal(KubeModel):
    """A taint the driver puts on the device in its ResourceSlice; empty lists match any value or effect."""

    key: str = ""
    values: Annotated[tuple[str, ...], NoneAsEmpty] = ()
    effects: Annotated[tuple[str, ...], NoneAsEmpty] = ()


class KubeletSignal(KubeModel):
    """The health values of ``allocatedResourcesStatus`` that count as a signal."""

    health: Annotated[tuple[str, ...], NoneAsEmpty] = ("Unhealthy",)


class Signals(KubeModel):
    slice_taint: SliceTaintSignal | None = None
    kubelet: KubeletSignal | None = None
    after: Any = "60s"


class Action(KubeModel):
    effect: str = "NoExecute"
    toleration_seconds: Any = None
    clear_after: Any = "10m"


class HealthPolicySpec(KubeModel):
    scope: DeviceSelection = DeviceSelection()
    signals: Signals = Signals()
    action: Action = Action()
    max_unavailable: Any = 1
    evictions_per_minute: Any = None


class HealthPolicy(KubeModel):
    """The ``DeviceHealthPolicy`` object; ``status`` stays raw so that conditions can be merged."""

    metadata: ObjectMeta
    spec: HealthPolicySpec = HealthPolicySpec()
    status: Annotated[Mapping[str, Any], NoneAsEmptyMap] = {}


# --- Pods and claims: the kubelet's health reports and the devices they name -------------------------


class PodStatus(health.PodStatus):
    phase: str = ""


class Pod(health.Pod):
    status: PodStatus = PodStatus()


class Result(claims.ResultWithTolerations, health.RequestResult):
    """A result with its request, and the tolerations the dry run weighs."""


AllocatedClaim = claims.ResourceClaim[claims.AllocationResult[Result]]


# --- DeviceTaintRule -----------------------------------------------------------------------------------


class RuleMeta(LeanMeta):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class DeviceTaintRule(taintrules.DeviceTaintRule):
    """The shared projection plus labels and annotations: the pacing annotation may drift."""

    metadata: RuleMeta

    @property
    def device(self) -> DeviceId | None:
        """The one device the rule names, as the policy writes them; None for any other shape."""
        selector = self.spec.device_selector
        if selector is None or None in (selector.driver, selector.pool, selector.device):
            return None
        return DeviceId(str(selector.driver), str(selector.pool), str(selector.device))
