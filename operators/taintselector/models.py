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
from typing import Annotated, Any, NamedTuple

from pydantic import Field

from operators.core import PROJECT_GROUP
from operators.core.models import KubeModel, LeanMeta, NoneAsEmpty, NoneAsEmptyMap, ObjectMeta
from operators.core.resources import ApiResource
from operators.dra import slices, taintrules
from operators.dra.selectable import SelectableDevice
from operators.dra.taints import DeviceTaint

VERSION = "v1alpha1"
API_VERSION = f"{PROJECT_GROUP}/{VERSION}"
KIND = "DeviceTaintSelector"
PLURAL = "devicetaintselectors"
SELECTORS = ApiResource(PROJECT_GROUP, VERSION, PLURAL, namespaced=False)


class DeviceId(NamedTuple):
    """A published device; sorting these orders by driver, then pool, then device name."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# --- DeviceTaintSelector -----------------------------------------------------------------------------


class CelExpression(KubeModel):
    expression: str


class ExpressionSelector(KubeModel):
    """One entry of ``selectors``; like a DeviceClass selector, ``cel`` is its only kind."""

    cel: CelExpression | None = None


class DeviceSelection(KubeModel):
    """``spec.deviceSelector``: every criterion that is set must match."""

    device_class_name: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selectors: Annotated[tuple[ExpressionSelector, ...], NoneAsEmpty] = ()
    all_devices: bool = False

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(entry.cel.expression for entry in self.selectors if entry.cel is not None)

    @property
    def has_criteria(self) -> bool:
        named = (self.device_class_name, self.driver, self.pool, self.device)
        return any(value is not None for value in named) or bool(self.expressions)


class TaintSelectorSpec(KubeModel):
    taint: DeviceTaint
    device_selector: DeviceSelection = DeviceSelection()


class TaintSelector(KubeModel):
    """The ``DeviceTaintSelector`` object; ``status`` stays raw so that conditions can be merged."""

    metadata: ObjectMeta
    spec: TaintSelectorSpec
    status: Annotated[Mapping[str, Any], NoneAsEmptyMap] = {}


# --- ResourceSlice and DeviceClass -------------------------------------------------------------------


ResourceSlice = slices.ResourceSlice[SelectableDevice]


class DeviceClassSpec(KubeModel):
    selectors: Annotated[tuple[ExpressionSelector, ...], NoneAsEmpty] = ()

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(entry.cel.expression for entry in self.selectors if entry.cel is not None)


class DeviceClass(KubeModel):
    metadata: ObjectMeta
    spec: DeviceClassSpec = DeviceClassSpec()


# --- DeviceTaintRule ---------------------------------------------------------------------------------


class RuleMeta(LeanMeta):
    labels: dict[str, str] = Field(default_factory=dict)


class DeviceTaintRule(taintrules.DeviceTaintRule):
    """The shared projection plus labels: they mark the rules this operator manages, and drift is patched."""

    metadata: RuleMeta
