"""Which published devices a project resource's device selector selects, or why it cannot say.

Shared by the operators that expand a selection by driver, pool, DeviceClass and CEL into exact
devices (taintselector's DeviceTaintSelector, devicehealth's DeviceHealthPolicy scope), so that the
same selector means the same devices in each.

The devices are those of the ResourceSlices, pool by pool, taking only the slices of a pool's
highest ``spec.pool.generation``: a driver republishes a pool under a new generation and older
slices linger until it deletes them, so a device that vanished from the new generation is gone
even if an old slice still lists it. A device listed twice is taken from the first slice by name,
so the answer never depends on the order in which slices arrived.

For each device the criteria are applied in a fixed order and the first one that does not match
ends the evaluation, as the scheduler does with a request's class and selectors:

1. ``driver``, ``pool`` and ``device`` (plain comparisons);
2. the DeviceClass's own CEL selectors, in order;
3. the selector's CEL expressions, in order.

So an expression that reads a vendor attribute is only evaluated for devices that passed the
earlier criteria; naming the driver keeps it away from devices of other vendors, where the
attribute would be missing.

Failure is all-or-nothing (:class:`Invalid`): an unknown DeviceClass, an expression that does not
compile, or an evaluation error on *any* candidate device invalidates the whole selection, because
a partial set of taints would silently miss devices. The message names the expression, the device
and the error. A selector without any criterion selects nothing unless ``allDevices`` is true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated

from operators.core.models import KubeModel, NoneAsEmpty, ObjectMeta

from . import pools, slices
from .cel import (
    CelCompileError,
    CelEvaluationError,
    CompiledExpression,
    CostBudget,
    PreparedDevice,
    compile_expression,
)
from .pools import DeviceId, PoolId
from .selectable import SelectableDevice
from .taints import selector_matches

__all__ = [
    "REASON_CEL_RUNTIME_ERROR",
    "REASON_INVALID_CEL",
    "REASON_INVALID_DEVICE_CLASS",
    "REASON_UNKNOWN_DEVICE_CLASS",
    "DeviceClass",
    "DeviceSelection",
    "ExpressionSelector",
    "Invalid",
    "ResourceSlice",
    "Selection",
    "quoted",
    "select_devices",
]

# Reasons of the Invalid condition; they are API (users match on them), so keep them stable.
REASON_INVALID_CEL = "InvalidCEL"
REASON_CEL_RUNTIME_ERROR = "CELRuntimeError"
REASON_UNKNOWN_DEVICE_CLASS = "UnknownDeviceClass"
REASON_INVALID_DEVICE_CLASS = "InvalidDeviceClass"

# A condition message holds at most 32768 characters (the CRD's limit, as metav1.Condition's),
# and a selector may carry 32 expressions of 10 KiB: quoted whole, the message of a selector
# whose expressions all fail would be refused, and the selector would never read Invalid.
QUOTED_LENGTH = 120
LISTED_PROBLEMS = 5
# What one selection's CEL may cost over all devices together. A comparison of the driver takes
# 19 steps, one of an attribute and the driver 50, so a class selector and an own expression cost
# about 9 million steps over 128 000 devices; five times that is a few minutes of one core. It
# stops a selector that is cheap per device but would take hours over every device of a cluster.
SELECTION_COST_LIMIT = 50_000_000
NARROW_HINT = "narrow the selection with driver, pool or device so that fewer devices are evaluated"


# --- What a selection reads -------------------------------------------------------------------------


class CelExpression(KubeModel):
    expression: str


class ExpressionSelector(KubeModel):
    """One entry of ``selectors``; like a DeviceClass selector, ``cel`` is its only kind."""

    cel: CelExpression | None = None


class DeviceSelection(KubeModel):
    """A project resource's device selector: every criterion that is set must match.

    It has the shape of the field upstream's DeviceTaintRule lost in 1.35 (``deviceClassName``,
    ``driver``, ``pool``, ``device``, ``selectors[].cel.expression``), plus ``allDevices`` to make
    "every device" explicit."""

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


class DeviceClassSpec(KubeModel):
    selectors: Annotated[tuple[ExpressionSelector, ...], NoneAsEmpty] = ()

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(entry.cel.expression for entry in self.selectors if entry.cel is not None)


class DeviceClass(KubeModel):
    metadata: ObjectMeta
    spec: DeviceClassSpec = DeviceClassSpec()


ResourceSlice = slices.ResourceSlice[SelectableDevice]


@dataclass(frozen=True)
class Selection:
    """The selected devices, sorted; ``empty_selector`` when nothing was asked for."""

    devices: tuple[DeviceId, ...]
    empty_selector: bool = False


@dataclass(frozen=True)
class Invalid:
    """The spec cannot be evaluated; ``message`` is one sentence naming the expression and the error."""

    reason: str
    message: str


def _visible_by_pool(
    slices: Iterable[ResourceSlice], wanted: Callable[[PoolId], bool]
) -> Iterator[tuple[DeviceId, SelectableDevice]]:
    """The devices of the wanted pools (:func:`operators.dra.pools.pool_devices`), sorted; one
    pool's devices at a time, so that a selection over a hundred thousand devices never holds an
    index of all of them."""
    for pool_id, members in sorted(pools.slices_by_pool(slices).items()):
        if not wanted(pool_id):
            continue
        for _, device in sorted(pools.pool_devices(members), key=lambda found: found[1].name):
            yield DeviceId(*pool_id, device.name), device


def quoted(expression: str) -> str:
    """The expression as a message names it: whole, or its start and its length."""
    if len(expression) <= QUOTED_LENGTH:
        return repr(expression)
    return f"{expression[:QUOTED_LENGTH]!r}... ({len(expression)} characters)"


def _compile_all(
    expressions: Iterable[str], describe: str, reason: str
) -> tuple[list[CompiledExpression], Invalid | None]:
    compiled: list[CompiledExpression] = []
    problems: list[str] = []
    for expression in expressions:
        try:
            compiled.append(compile_expression(expression))
        except CelCompileError as error:
            problems.append(f"{describe} {quoted(expression)} is invalid: {error}")
    if problems:
        listed = problems[:LISTED_PROBLEMS]
        if len(problems) > LISTED_PROBLEMS:
            listed.append(f"{len(problems) - LISTED_PROBLEMS} more are invalid too")
        return compiled, Invalid(reason, "; ".join(listed) + ".")
    return compiled, None


def select_devices(
    selection: DeviceSelection,
    slices: Iterable[ResourceSlice],
    classes: Mapping[str, DeviceClass],
) -> Selection | Invalid:
    """Evaluate ``selection`` against the published devices (see the module docstring)."""
    if not selection.has_criteria and not selection.all_devices:
        return Selection(devices=(), empty_selector=True)

    class_expressions: list[CompiledExpression] = []
    class_name = selection.device_class_name
    if class_name is not None:
        device_class = classes.get(class_name)
        if device_class is None:
            return Invalid(REASON_UNKNOWN_DEVICE_CLASS, f"DeviceClass {class_name!r} does not exist.")
        class_expressions, problem = _compile_all(
            device_class.spec.expressions, f"DeviceClass {class_name!r} selector", REASON_INVALID_DEVICE_CLASS
        )
        if problem is not None:
            return problem
    own_expressions, problem = _compile_all(selection.expressions, "CEL expression", REASON_INVALID_CEL)
    if problem is not None:
        return problem

    selected: list[DeviceId] = []
    total = CostBudget(SELECTION_COST_LIMIT)

    def wanted(pool_id: PoolId) -> bool:
        driver, pool = pool_id
        return selection.driver in (None, driver) and selection.pool in (None, pool)

    for device_id, device in _visible_by_pool(slices, wanted):
        if not selector_matches(selection, device_id.driver, device_id.pool, device_id.device):
            continue
        prepared = PreparedDevice(device.cel_device(device_id.driver))
        outcome = _evaluate_device(prepared, device_id, class_name, class_expressions, own_expressions, total)
        if isinstance(outcome, Invalid):
            return outcome
        if outcome:
            selected.append(device_id)
    return Selection(devices=tuple(selected))


def _evaluate_device(
    prepared: PreparedDevice,
    device_id: DeviceId,
    class_name: str | None,
    class_expressions: list[CompiledExpression],
    own_expressions: list[CompiledExpression],
    total: CostBudget,
) -> bool | Invalid:
    stages = [(f"DeviceClass {class_name!r} selector", e) for e in class_expressions]
    stages += [("CEL expression", e) for e in own_expressions]
    for describe, expression in stages:
        try:
            if not expression.matches(prepared, total):
                return False
        except CelEvaluationError as error:
            hint = f"; {NARROW_HINT}" if error.detail == total.message else ""
            return Invalid(
                REASON_CEL_RUNTIME_ERROR,
                f"{describe} {quoted(expression.expression)} failed on device {device_id}: {error}{hint}.",
            )
    return True
