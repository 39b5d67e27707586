"""The taints a device carries, each with where it comes from: what ``explain`` and ``pools`` show.

Pure. A device is tainted by its driver (``spec.devices[].taints`` of the pool's current slices) and
by the DeviceTaintRules that select it (as the operators apply rules, :func:`rule_matches`). Only
``NoSchedule`` and ``NoExecute`` keep claims off or pods away; a ``None`` taint blocks nothing and is
how drivers publish health as information, so it is shown as a signal, never as a reason. A rule that
a DeviceHealthPolicy controls names the policy, because that is the object to look at (or delete)
when the device is out of service.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.dra.health import health_policy_of
from operators.dra.pools import DeviceId, visible_devices
from operators.dra.slices import KIND as SLICE_KIND
from operators.dra.slices import ResourceSlice, SliceDevice
from operators.dra.taintrules import KIND as RULE_KIND
from operators.dra.taintrules import DeviceTaintRule, rule_matches
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, EFFECT_NONE, DeviceTaint

BLOCKING_EFFECTS = (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)
SIGNAL_NOTE = "None: informational, blocks nothing"


@dataclass(frozen=True)
class PlacedTaint:
    """A taint on one device, and the object and field it is read from."""

    device: DeviceId
    taint: DeviceTaint
    kind: str
    """``ResourceSlice`` or ``DeviceTaintRule``."""
    name: str
    path: str
    policy: str = ""
    """The DeviceHealthPolicy that controls the rule, or ``""``."""

    @property
    def source(self) -> str:
        return f"{self.kind} {self.name} {self.path}"

    @property
    def blocks(self) -> bool:
        return self.taint.effect in BLOCKING_EFFECTS

    @property
    def pair(self) -> str:
        return f"{self.taint.key}={self.taint.value}"

    @property
    def origin(self) -> str:
        """The object the taint comes from, and the policy behind it: ``ResourceSlice s``,
        ``DeviceTaintRule r of DeviceHealthPolicy p``."""
        return f"{self.kind} {self.name}" + (f" of DeviceHealthPolicy {self.policy}" if self.policy else "")

    def describe(self) -> str:
        """``k=v:NoExecute`` for a taint that blocks, ``signal: k=v (None: ...)`` for one that does not;
        either followed by the policy that wrote it, if one did."""
        policy = f" (DeviceHealthPolicy {self.policy})" if self.policy else ""
        if self.blocks:
            return f"{self.pair}:{self.taint.effect}{policy}"
        note = (
            SIGNAL_NOTE
            if self.taint.effect == EFFECT_NONE
            else f"{self.taint.effect or 'no effect'}: blocks nothing"
        )
        return f"signal: {self.pair} ({note}){policy}"


def parse_rules(bodies: Iterable[Mapping[str, Any]]) -> list[DeviceTaintRule]:
    return [DeviceTaintRule.model_validate(body) for body in bodies]


def rule_taints(device: DeviceId, rules: Sequence[DeviceTaintRule]) -> list[PlacedTaint]:
    return [
        PlacedTaint(
            device,
            rule.spec.taint,
            RULE_KIND,
            rule.metadata.name,
            ".spec.taint",
            health_policy_of(rule.metadata.owner_references) or "",
        )
        for rule in rules
        if rule_matches(rule.spec.device_selector, device.driver, device.pool, device.device)
    ]


def slice_taints(device: DeviceId, slice_name: str, published: SliceDevice) -> list[PlacedTaint]:
    return [
        PlacedTaint(device, taint, SLICE_KIND, slice_name, f".spec.devices[{device.device}].taints")
        for taint in published.taints
    ]


def placed_taints(
    slices: Iterable[ResourceSlice[Any]], rules: Sequence[DeviceTaintRule]
) -> dict[DeviceId, list[PlacedTaint]]:
    """Every tainted device of the current slices, in device order, with its slice's taints first."""
    found: dict[DeviceId, list[PlacedTaint]] = {}
    for ((driver, pool), name), (resource_slice, published) in sorted(visible_devices(slices).items()):
        device = DeviceId(driver, pool, name)
        taints = [*slice_taints(device, resource_slice.name, published), *rule_taints(device, rules)]
        if taints:
            found[device] = taints
    return found
