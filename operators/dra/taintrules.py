"""The built-in DeviceTaintRule as every operator reads it: API coordinates and one typed projection.

The fields read are named alike in ``v1``, ``v1beta2`` and ``v1alpha3``, so one projection serves all
three. Operators layer their own needs on it by subclassing: a cache of every rule may drop conditions
it never looks at, a writer of rules may add the labels it manages.
"""

from __future__ import annotations

from typing import Annotated

from operators.core.conditions import ObservedCondition
from operators.core.models import KubeModel, LeanMeta, NoneAsEmpty

from .taints import DeviceTaint, DeviceTaintSelector

KIND = "DeviceTaintRule"
PLURAL = "devicetaintrules"
VERSIONS = ("v1", "v1beta2", "v1alpha3")
"""Newest first: an operator watches the first one the cluster serves."""

EVICTION_IN_PROGRESS = "EvictionInProgress"


class RuleDeviceSelector(DeviceTaintSelector):
    """``spec.deviceSelector``; the two fields below exist only in ``v1alpha3`` and ``v1beta2``.

    They are read so that a consumer can tell a rule narrows its devices by class or CEL, which
    driver, pool and device alone do not express; matching still uses only those three.
    """

    device_class_name: str | None = None
    selectors: tuple[object, ...] | None = None


class RuleSpec(KubeModel):
    device_selector: RuleDeviceSelector | None = None
    taint: DeviceTaint


class RuleStatus(KubeModel):
    conditions: Annotated[tuple[ObservedCondition, ...], NoneAsEmpty] = ()


class DeviceTaintRule(KubeModel):
    metadata: LeanMeta
    spec: RuleSpec
    status: RuleStatus = RuleStatus()

    @property
    def eviction_condition(self) -> ObservedCondition | None:
        return next((c for c in self.status.conditions if c.type == EVICTION_IN_PROGRESS), None)
