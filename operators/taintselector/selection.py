"""What a DeviceTaintSelector selects, or why it cannot say: its taint, then its device selection.

The selection itself (driver, pool, DeviceClass, CEL; all-or-nothing) is the DRA domain's
(:mod:`operators.dra.selection`), shared with devicehealth; only the check of the taint is the
selector's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from operators.dra.selection import Invalid, Selection, select_devices
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, EFFECT_NONE

from .models import DeviceClass, ResourceSlice, TaintSelectorSpec

__all__ = ["REASON_INVALID_TAINT", "check_spec", "evaluate"]

REASON_INVALID_TAINT = "InvalidTaint"

VALID_EFFECTS = (EFFECT_NONE, EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)


def check_spec(spec: TaintSelectorSpec) -> Invalid | None:
    """What admission should already have refused, re-checked so that a bypass cannot create bad rules."""
    if not spec.taint.key:
        return Invalid(REASON_INVALID_TAINT, "The taint has no key.")
    if spec.taint.effect not in VALID_EFFECTS:
        return Invalid(
            REASON_INVALID_TAINT,
            f"The taint effect {spec.taint.effect!r} is not one of {', '.join(VALID_EFFECTS)}.",
        )
    return None


def evaluate(
    spec: TaintSelectorSpec,
    slices: Iterable[ResourceSlice],
    classes: Mapping[str, DeviceClass],
) -> Selection | Invalid:
    """The whole verdict on a spec: its taint, then its device selection."""
    return check_spec(spec) or select_devices(spec.device_selector, slices, classes)
