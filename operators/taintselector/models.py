"""Typed projections of the objects the taint-selector operator reads, and its own resource.

``DeviceTaintSelector`` (``dra-operators.io/v1alpha1``, cluster-scoped) restores what the
built-in DeviceTaintRule lost in Kubernetes 1.35: selecting devices by DeviceClass and with CEL.
Its ``spec.deviceSelector`` deliberately has the shape of the removed upstream field
(``deviceClassName``, ``driver``, ``pool``, ``device``, ``selectors[].cel.expression``), so rules
written for the documented API carry over, plus ``allDevices`` to make "every device" explicit.

Only the fields the operator uses are modelled; Kubernetes omits empty lists, and a hand-written
object may carry ``null`` for one, which reads as empty instead of failing the whole object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from operators.core import PROJECT_GROUP
from operators.core.models import KubeModel, LeanMeta, NoneAsEmptyMap, ObjectMeta
from operators.core.resources import ApiResource
from operators.dra import taintrules
from operators.dra.pools import DeviceId
from operators.dra.selection import (
    DeviceClass,
    DeviceClassSpec,
    DeviceSelection,
    ExpressionSelector,
    ResourceSlice,
)
from operators.dra.taints import DeviceTaint

__all__ = [
    "API_VERSION",
    "KIND",
    "PLURAL",
    "SELECTORS",
    "VERSION",
    "DeviceClass",
    "DeviceClassSpec",
    "DeviceId",
    "DeviceSelection",
    "DeviceTaintRule",
    "ExpressionSelector",
    "ResourceSlice",
    "RuleMeta",
    "TaintSelector",
    "TaintSelectorSpec",
]

VERSION = "v1alpha1"
API_VERSION = f"{PROJECT_GROUP}/{VERSION}"
KIND = "DeviceTaintSelector"
PLURAL = "devicetaintselectors"
SELECTORS = ApiResource(PROJECT_GROUP, VERSION, PLURAL, namespaced=False)


# --- DeviceTaintSelector -----------------------------------------------------------------------------


class TaintSelectorSpec(KubeModel):
    taint: DeviceTaint
    device_selector: DeviceSelection = DeviceSelection()


class TaintSelector(KubeModel):
    """The ``DeviceTaintSelector`` object; ``status`` stays raw so that conditions can be merged."""

    metadata: ObjectMeta
    spec: TaintSelectorSpec
    status: Annotated[Mapping[str, Any], NoneAsEmptyMap] = {}


# --- DeviceTaintRule ---------------------------------------------------------------------------------


class RuleMeta(LeanMeta):
    labels: dict[str, str] = Field(default_factory=dict)


class DeviceTaintRule(taintrules.DeviceTaintRule):
    """The shared projection plus labels: they mark the rules this operator manages, and drift is patched."""

    metadata: RuleMeta
