"""The status of a DeviceTaintSelector: conditions ``Ready``, ``Invalid`` and ``EvictionInProgress``.

Types and reasons are API (``kubectl wait --for=condition=Ready``, alerts on ``Invalid``), so they
are constants here and never change meaning:

``Invalid``
    True with the selection's reason (``InvalidCEL``, ``CELRuntimeError``, ``UnknownDeviceClass``,
    ``InvalidDeviceClass``, ``InvalidTaint``) and a message naming the expression and the error;
    False with ``Valid``.
``Ready``
    True once the selected devices and the selector's DeviceTaintRules agree: ``RulesInPlace``, or
    ``EmptySelector`` for a selector without criteria (which selects nothing). False with
    ``Invalid``, ``RulesPending`` (writes still to do), ``RuleConflict`` (a wanted rule name is
    controlled by someone else) or ``DeviceTaintRuleUnavailable`` (the cluster serves no
    DeviceTaintRule API, as 1.35 and 1.36 by default; the message says how to serve it on each
    version; the selection is still evaluated and counted, and the operator stays ready).
``EvictionInProgress``
    Aggregated from the rules' own condition, see :func:`rules.eviction_condition`; for
    ``effect: None``, False with ``NoEffect`` and the selection's own dry run (:mod:`.dryrun`), whose
    counts are also in ``status.dryRun``.

An invalid spec changes nothing in the cluster: the rules of the last valid selection stay, and
so does ``selectedDevices``, which keeps describing them. ``lastTransitionTime`` only moves when a
condition's status changes, and ``observedGeneration`` says which spec the status describes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from operators.core.conditions import FALSE, TRUE, Condition, set_observed, status_differs
from operators.dra import taintrules
from operators.dra.selection import Invalid, Selection
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from .dryrun import REASON_NO_EFFECT, DryRun
from .models import DeviceTaintRule, TaintSelector
from .rules import RuleDiff, eviction_condition

__all__ = [
    "INVALID",
    "READY",
    "REASON_DEVICE_TAINT_RULE_UNAVAILABLE",
    "REASON_EMPTY_SELECTOR",
    "REASON_INVALID",
    "REASON_RULES_IN_PLACE",
    "REASON_RULES_PENDING",
    "REASON_RULE_CONFLICT",
    "REASON_VALID",
    "needs_write",
    "selector_status",
]

READY = "Ready"
INVALID = "Invalid"

REASON_VALID = "Valid"
REASON_INVALID = "Invalid"
REASON_RULES_IN_PLACE = "RulesInPlace"
REASON_EMPTY_SELECTOR = "EmptySelector"
REASON_RULES_PENDING = "RulesPending"
REASON_RULE_CONFLICT = "RuleConflict"
REASON_DEVICE_TAINT_RULE_UNAVAILABLE = "DeviceTaintRuleUnavailable"

_KEPT = "Existing DeviceTaintRules are left as they are until the spec is fixed."


def _devices(count: int) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _ready(
    outcome: Selection | Invalid, rules_available: bool, pending: RuleDiff | None
) -> tuple[str, str, str]:
    """(status, reason, message) of the Ready condition."""
    if isinstance(outcome, Invalid):
        return FALSE, REASON_INVALID, f"{outcome.message} {_KEPT}"
    if not rules_available:
        return (
            FALSE,
            REASON_DEVICE_TAINT_RULE_UNAVAILABLE,
            f"The {_devices(len(outcome.devices))} selected cannot be tainted: "
            f"{DEVICE_TAINT_RULES_UNSERVED}.",
        )
    if pending is not None and pending.conflicts:
        return (
            FALSE,
            REASON_RULE_CONFLICT,
            f"DeviceTaintRule {_names(pending.conflicts)} is controlled by another owner; "
            "waiting for it to go away.",
        )
    if pending is not None and not pending.in_sync:
        return (
            FALSE,
            REASON_RULES_PENDING,
            f"DeviceTaintRules still to create: {len(pending.create)}, to update: {len(pending.update)}, "
            f"to delete: {len(pending.delete)}.",
        )
    if outcome.empty_selector:
        return (
            TRUE,
            REASON_EMPTY_SELECTOR,
            "The selector sets no criterion and allDevices is not true, so it selects no device.",
        )
    if not outcome.devices:
        return TRUE, REASON_RULES_IN_PLACE, "No device matches the selector, so no device is tainted."
    return (
        TRUE,
        REASON_RULES_IN_PLACE,
        f"{_devices(len(outcome.devices))} selected, each tainted by its own DeviceTaintRule.",
    )


def selector_status(
    selector: TaintSelector,
    outcome: Selection | Invalid,
    *,
    rules_available: bool,
    pending: RuleDiff | None,
    rules: Sequence[DeviceTaintRule],
    now: str | None = None,
    dry_run: DryRun | None = None,
) -> dict[str, Any]:
    """The full ``status`` to write, given what this pass found and what is still to do (``pending``)."""
    generation = selector.metadata.generation
    previous = selector.status
    if isinstance(outcome, Invalid):
        message = f"{outcome.message} {_KEPT}"
        invalid = Condition(type=INVALID, status=TRUE, reason=outcome.reason, message=message)
        selected = previous.get("selectedDevices")
    else:
        invalid = Condition(type=INVALID, status=FALSE, reason=REASON_VALID, message="The selector is valid.")
        selected = len(outcome.devices)
    status, reason, message = _ready(outcome, rules_available, pending)
    ready = Condition(type=READY, status=status, reason=reason, message=message)
    if dry_run is None:
        eviction = eviction_condition(rules)
    else:
        eviction = Condition(
            type=taintrules.EVICTION_IN_PROGRESS,
            status=FALSE,
            reason=REASON_NO_EFFECT,
            message=dry_run.message,
        )
    conditions = set_observed(previous.get("conditions"), generation, (ready, invalid, eviction), now)
    result: dict[str, Any] = {"observedGeneration": generation, "conditions": conditions}
    if selected is not None:
        result["selectedDevices"] = selected
    if dry_run is not None:
        result["dryRun"] = dry_run.as_status()
    return result


def needs_write(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` says anything ``previous`` does not (transition times alone do not count)."""
    return status_differs(previous, new, ("observedGeneration", "selectedDevices", "dryRun"))
