"""A DeviceHealthPolicy's spec, checked: the values the decision computes with, or why there are none.

Admission (the CRD's schema and CEL rules) refuses most of this already; it is checked again
because a policy written before a schema change, or through a bypass, must never act on a value
it cannot read. Every problem is one sentence for the ``Ready`` condition (docs/device-health.md,
"Bad input"): nothing is tainted or cleared while the spec is invalid.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from operators.dra.durations import duration_seconds
from operators.dra.selection import Invalid
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, EFFECT_NONE

from .models import HealthPolicySpec, SliceTaintSignal

__all__ = [
    "HEALTH_VALUES",
    "NEVER",
    "REASON_INVALID_SPEC",
    "REASON_MAX_UNAVAILABLE_ABOVE_SCOPE",
    "REASON_NO_SIGNAL",
    "Limit",
    "ValidSpec",
    "check_scope_size",
    "check_spec",
]

REASON_NO_SIGNAL = "NoSignal"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_MAX_UNAVAILABLE_ABOVE_SCOPE = "MaxUnavailableAboveScope"

NEVER = "Never"
HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")
ACTION_EFFECTS = (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE, EFFECT_NONE)
TAINT_EFFECTS = (EFFECT_NONE, EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)
_PERCENT = re.compile(r"([0-9]+)%")


@dataclass(frozen=True)
class Limit:
    """``maxUnavailable``: a number of devices, or a percentage of the scope (and of each pool)."""

    value: int
    percent: bool = False

    def of(self, size: int) -> int:
        """The devices allowed out of ``size``: a percentage rounds down, but is at least one
        unless the value is 0, so that "25%" of a pool of two still lets one device be tainted."""
        if not self.percent:
            return self.value
        if self.value == 0:
            return 0
        return max(1, math.floor(size * self.value / 100))

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


@dataclass(frozen=True)
class ValidSpec:
    slice_taint: SliceTaintSignal | None
    kubelet_health: frozenset[str] | None
    after: float
    effect: str
    toleration_seconds: int | None
    clear_after: float | None
    """None: ``Never``, the rule stays until a person deletes it."""
    max_unavailable: Limit
    evictions_per_minute: int | None

    @property
    def dry_run(self) -> bool:
        return self.effect == EFFECT_NONE


def _invalid(message: str) -> Invalid:
    return Invalid(REASON_INVALID_SPEC, message)


def _limit(value: Any) -> Limit | Invalid:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Limit(value)
    if isinstance(value, str):
        match = _PERCENT.fullmatch(value.strip())
        if match is not None and int(match.group(1)) <= 100:
            return Limit(int(match.group(1)), percent=True)
    return _invalid(
        f"maxUnavailable {value!r} is neither a number of devices (0 or more) nor a percentage such as '25%'."
    )


def _seconds(field: str, value: Any) -> float | Invalid:
    try:
        return duration_seconds(value)
    except ValueError:
        return _invalid(f"{field} {value!r} is not a duration such as 60s, 10m or 1h.")


def _whole(field: str, value: Any, minimum: int) -> int | Invalid | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    return _invalid(f"{field} {value!r} is not a whole number of at least {minimum}.")


def check_spec(spec: HealthPolicySpec) -> ValidSpec | Invalid:
    """The spec's values, or the first problem with it (the scope is checked by the selection)."""
    signals = spec.signals
    taint = signals.slice_taint
    kubelet = signals.kubelet
    if (taint is None or not taint.key) and kubelet is None:
        return Invalid(
            REASON_NO_SIGNAL,
            "No signal is configured: set signals.sliceTaint.key, signals.kubelet, or both.",
        )
    if taint is not None and not taint.key:
        return _invalid("signals.sliceTaint has no key.")
    if taint is not None and (unknown := [e for e in taint.effects if e not in TAINT_EFFECTS]):
        return _invalid(f"signals.sliceTaint.effects {unknown} are not among {', '.join(TAINT_EFFECTS)}.")
    if kubelet is not None:
        unknown = [h for h in kubelet.health if h not in HEALTH_VALUES]
        if unknown or not kubelet.health:
            return _invalid(
                f"signals.kubelet.health must list some of {', '.join(HEALTH_VALUES)}; "
                f"it has {list(kubelet.health)}."
            )
    after = _seconds("signals.after", signals.after)
    if isinstance(after, Invalid):
        return after
    action = spec.action
    if action.effect not in ACTION_EFFECTS:
        return _invalid(f"action.effect {action.effect!r} is not one of {', '.join(ACTION_EFFECTS)}.")
    toleration = _whole("action.tolerationSeconds", action.toleration_seconds, 0)
    if isinstance(toleration, Invalid):
        return toleration
    clear_after: float | None = None
    if action.clear_after != NEVER:
        cleared = _seconds("action.clearAfter", action.clear_after)
        if isinstance(cleared, Invalid):
            return cleared
        clear_after = cleared
    limit = _limit(spec.max_unavailable)
    if isinstance(limit, Invalid):
        return limit
    pace = _whole("evictionsPerMinute", spec.evictions_per_minute, 1)
    if isinstance(pace, Invalid):
        return pace
    return ValidSpec(
        slice_taint=taint,
        kubelet_health=frozenset(kubelet.health) if kubelet is not None else None,
        after=after,
        effect=action.effect,
        toleration_seconds=toleration,
        clear_after=clear_after,
        max_unavailable=limit,
        evictions_per_minute=pace,
    )


def check_scope_size(spec: ValidSpec, scope_size: int) -> Invalid | None:
    """A number above the scope's size is a typo, not a limit: it would never hold anything back."""
    limit = spec.max_unavailable
    # An empty scope is a driver that has not published yet, not a typo.
    if scope_size and not limit.percent and limit.value > scope_size:
        return Invalid(
            REASON_MAX_UNAVAILABLE_ABOVE_SCOPE,
            f"maxUnavailable {limit.value} is above the {scope_size} devices in the scope.",
        )
    return None
