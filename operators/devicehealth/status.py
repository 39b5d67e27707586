"""The status of a DeviceHealthPolicy: conditions ``Ready`` and ``Active``, counts, devices, dry run.

Types and reasons are API (``kubectl wait --for=condition=Ready``, alerts), so they are constants:

``Ready``
    True with ``Valid`` while the spec is valid, its scope evaluates and DeviceTaintRules are
    served. False with the reason of the problem (``NoSignal``, ``InvalidSpec``,
    ``MaxUnavailableAboveScope``, ``InvalidCEL``, ``CELRuntimeError``, ``UnknownDeviceClass``,
    ``InvalidDeviceClass``) or ``DeviceTaintRuleUnavailable``; then nothing is tainted or
    cleared, and the rules the policy owns stay.
``Active``
    True while the policy has devices tainted: ``Remediating``, or ``HeldBack`` when candidates
    wait for a free place. False with ``Idle`` (with ``HeldBack`` when every place is taken by
    nothing, i.e. ``maxUnavailable: 0``, or in a dry run that holds devices back).

``devices`` lists the signalled and tainted devices (at most :data:`LISTED_DEVICES`) with their
state (``Conflict``: the name of the device's rule is held by a rule the policy does not
control); ``dryRun`` (effect ``None``) the pods the policy would evict, each once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.core.conditions import FALSE, TRUE, Condition, format_time, set_observed, status_differs
from operators.core.events import ObjectRef

from .models import DeviceId, HealthPolicy

__all__ = [
    "ACTIVE",
    "LISTED_DEVICES",
    "READY",
    "REASON_DEVICE_TAINT_RULE_UNAVAILABLE",
    "REASON_HELD_BACK",
    "REASON_IDLE",
    "REASON_REMEDIATING",
    "REASON_VALID",
    "STATE_CONFLICT",
    "STATE_HELD_BACK",
    "STATE_SIGNALLED",
    "STATE_TAINTED",
    "STATE_WOULD_TAINT",
    "Counts",
    "DeviceState",
    "needs_write",
    "policy_status",
]

READY = "Ready"
ACTIVE = "Active"

REASON_VALID = "Valid"
REASON_DEVICE_TAINT_RULE_UNAVAILABLE = "DeviceTaintRuleUnavailable"
REASON_REMEDIATING = "Remediating"
REASON_HELD_BACK = "HeldBack"
REASON_IDLE = "Idle"

STATE_TAINTED = "Tainted"
STATE_WOULD_TAINT = "WouldTaint"
STATE_HELD_BACK = "HeldBack"
STATE_SIGNALLED = "Signalled"
STATE_CONFLICT = "Conflict"

LISTED_DEVICES = 100
LISTED_PODS = 100

_KEPT = "Nothing is tainted or cleared until it is fixed; the DeviceTaintRules the policy owns stay."


@dataclass(frozen=True)
class DeviceState:
    device: DeviceId
    state: str
    since: datetime | None = None

    def as_status(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "driver": self.device.driver,
            "pool": self.device.pool,
            "device": self.device.device,
            "state": self.state,
        }
        if self.since is not None:
            entry["signalledSince"] = format_time(self.since)
        return entry


@dataclass(frozen=True)
class Counts:
    signalled: int = 0
    tainted: int = 0
    held_back: int = 0


def _devices(count: int) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def _active(counts: Counts, dry_run: bool, limit: str) -> Condition:
    held = f"; {_devices(counts.held_back)} held back by maxUnavailable {limit}" if counts.held_back else ""
    if dry_run:
        reason = REASON_HELD_BACK if counts.held_back else REASON_IDLE
        message = f"Dry run (effect None): {_devices(counts.tainted)} would be tainted{held}."
        return Condition(type=ACTIVE, status=FALSE, reason=reason, message=message)
    if counts.tainted:
        reason = REASON_HELD_BACK if counts.held_back else REASON_REMEDIATING
        message = f"{_devices(counts.tainted)} tainted{held}."
        return Condition(type=ACTIVE, status=TRUE, reason=reason, message=message)
    reason = REASON_HELD_BACK if counts.held_back else REASON_IDLE
    message = f"No device is tainted{held}." if held else "No device is tainted."
    return Condition(type=ACTIVE, status=FALSE, reason=reason, message=message)


def policy_status(
    policy: HealthPolicy,
    *,
    problem: tuple[str, str] | None,
    counts: Counts | None,
    devices: Sequence[DeviceState] = (),
    dry_run: bool = False,
    limit: str = "",
    pods: Sequence[ObjectRef] | None = None,
    now: str | None = None,
) -> dict[str, Any]:
    """The full status; ``problem`` is (reason, message) when the policy cannot act, and then the
    counts and devices of the last pass that could stay as they were (``counts`` None)."""
    generation = policy.metadata.generation
    previous = policy.status
    if problem is not None:
        reason, message = problem
        ready = Condition(type=READY, status=FALSE, reason=reason, message=f"{message} {_KEPT}")
    else:
        ready = Condition(
            type=READY, status=TRUE, reason=REASON_VALID, message="The policy is valid and acting."
        )
    result: dict[str, Any] = {"observedGeneration": generation}
    if counts is None:
        for key in ("signalledDevices", "taintedDevices", "heldBackDevices", "devices", "dryRun"):
            if key in previous:
                result[key] = previous[key]
        result["conditions"] = set_observed(previous.get("conditions"), generation, [ready], now)
        return result
    active = _active(counts, dry_run, limit)
    result["conditions"] = set_observed(previous.get("conditions"), generation, [ready, active], now)
    result["signalledDevices"] = counts.signalled
    result["taintedDevices"] = counts.tainted
    result["heldBackDevices"] = counts.held_back
    result["devices"] = [state.as_status() for state in devices[:LISTED_DEVICES]]
    if dry_run and pods is not None:
        result["dryRun"] = {
            "pods": len(pods),
            "podNames": [f"{ref.namespace}/{ref.name}" for ref in pods[:LISTED_PODS]],
        }
    return result


def needs_write(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` says anything ``previous`` does not (transition times alone do not count)."""
    fields = (
        "observedGeneration",
        "signalledDevices",
        "taintedDevices",
        "heldBackDevices",
        "devices",
        "dryRun",
    )
    return status_differs(previous, new, fields)
