"""The built-in DeviceTaintRules that carry a selector's taint: one per selected device.

Why one rule per device: the built-in rule can only name a driver, a pool and a device, so a
selection by class or CEL is expanded here into exact device names. The scheduler then keeps new
claims off the devices (``NoSchedule``) and the devicetaint operator evicts for ``NoExecute``;
neither needs to know about selectors.

Naming is deterministic: ``<selector name>-<12 hex digits of sha256([driver, pool, device])>``.
A device keeps its rule across restarts and re-evaluations, a taint change updates the rules in
place (so the taint is never absent in between, and kube-apiserver restarts ``timeAdded`` only
when the effect changes), and two selectors never produce the same name.

Ownership: every rule has the selector as its controller owner reference, so deleting the selector
lets the garbage collector delete its rules, and a label with the selector's UID lets the operator
list them. A rule with a wanted name that another owner controls is never touched; it is reported
as a conflict (typically the rules of a deleted selector of the same name, still being collected).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.core.conditions import FALSE, TRUE, UNKNOWN, Condition, current
from operators.dra import taintrules
from operators.dra.taints import DeviceTaint

from .models import API_VERSION, KIND, DeviceId, DeviceTaintRule, TaintSelector

__all__ = [
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "SELECTOR_NAME_ANNOTATION",
    "SELECTOR_UID_LABEL",
    "RuleDiff",
    "RuleUpdate",
    "desired_rules",
    "diff_rules",
    "eviction_condition",
    "rule_name",
]

SELECTOR_UID_LABEL = "dra-operators.io/taint-selector-uid"
"""Label with the owning selector's UID: list selectors are by UID because a name may exceed 63 characters."""
SELECTOR_NAME_ANNOTATION = "dra-operators.io/taint-selector"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "dra-operators-taintselector"


def rule_name(selector_name: str, device: DeviceId) -> str:
    """A valid DNS subdomain, unique per (selector name, device) and stable over time."""
    return taintrules.owned_rule_name(selector_name, device)


def _taint_body(taint: DeviceTaint) -> dict[str, Any]:
    return taintrules.taint_body(taint.key, taint.value, taint.effect)


def _labels(selector: TaintSelector) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, SELECTOR_UID_LABEL: selector.metadata.uid}


def desired_rules(
    selector: TaintSelector, devices: Iterable[DeviceId], rule_api_version: str
) -> dict[str, dict[str, Any]]:
    """Rule name -> full object to create, for ``rule_api_version`` (e.g. ``resource.k8s.io/v1``)."""
    owner = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": selector.metadata.name,
        "uid": selector.metadata.uid,
    }
    rules: dict[str, dict[str, Any]] = {}
    for device in devices:
        name = rule_name(selector.metadata.name, device)
        rules[name] = taintrules.owned_rule(
            name=name,
            api_version=rule_api_version,
            owner=owner,
            device=device,
            taint=_taint_body(selector.spec.taint),
            labels=_labels(selector),
            annotations={SELECTOR_NAME_ANNOTATION: selector.metadata.name},
        )
    return rules


@dataclass(frozen=True)
class RuleUpdate:
    """A JSON merge patch that brings an existing rule back to its desired spec and labels."""

    name: str
    patch: dict[str, Any]


@dataclass(frozen=True)
class RuleDiff:
    """What to do so that the selector's rules are exactly the desired ones."""

    create: tuple[dict[str, Any], ...] = ()
    update: tuple[RuleUpdate, ...] = ()
    delete: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()

    @property
    def in_sync(self) -> bool:
        return not (self.create or self.update or self.delete or self.conflicts)


_SELECTOR_FIELDS = {"driver", "pool", "device"}


def _patch(rule: DeviceTaintRule, desired: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    labels = desired["metadata"]["labels"]
    if any(rule.metadata.labels.get(key) != value for key, value in labels.items()):
        patch["metadata"] = {"labels": labels}
    spec = desired["spec"]
    wanted = spec["deviceSelector"]
    current = rule.spec.device_selector
    # Only what this operator writes: a field of an older version that it never sets is no drift.
    selector_now = (
        current.model_dump(include=_SELECTOR_FIELDS, exclude_none=True) if current is not None else None
    )
    taint = rule.spec.taint
    wanted_taint = spec["taint"]
    spec_patch: dict[str, Any] = {}
    if selector_now != wanted:
        spec_patch["deviceSelector"] = wanted
    if (taint.key, taint.value, taint.effect) != (
        wanted_taint["key"],
        wanted_taint.get("value", ""),
        wanted_taint["effect"],
    ):
        # timeAdded is left out: kube-apiserver keeps it, or restarts it when the effect changes.
        spec_patch["taint"] = {**wanted_taint, "value": wanted_taint.get("value")}
    if spec_patch:
        patch["spec"] = spec_patch
    return patch


def diff_rules(
    selector_uid: str, desired: Mapping[str, Mapping[str, Any]], existing: Iterable[DeviceTaintRule]
) -> RuleDiff:
    """Compare the desired rules with the existing ones (those listed by label, or bearing a desired name)."""
    mine: dict[str, DeviceTaintRule] = {}
    conflicts: list[str] = []
    for rule in existing:
        name = rule.metadata.name
        if rule.metadata.controlled_by(selector_uid):
            mine[name] = rule
        elif name in desired:
            conflicts.append(name)
    create = tuple(
        dict(desired[name]) for name in sorted(desired) if name not in mine and name not in conflicts
    )
    update = []
    for name in sorted(set(mine) & set(desired)):
        if mine[name].metadata.deletion_timestamp is not None:
            # Already going away: recreating is only possible once it is gone.
            conflicts.append(name)
            continue
        patch = _patch(mine[name], desired[name])
        if patch:
            update.append(RuleUpdate(name, patch))
    delete = tuple(
        sorted(
            name
            for name, rule in mine.items()
            if name not in desired and rule.metadata.deletion_timestamp is None
        )
    )
    return RuleDiff(create=create, update=tuple(update), delete=delete, conflicts=tuple(sorted(conflicts)))


# --- EvictionInProgress, aggregated --------------------------------------------------------------------

REASON_PENDING = "PodsPendingEviction"
REASON_NO_RULES = "NoRules"
REASON_NOT_REPORTED = "NotReported"
REASON_NONE_PENDING = "NoPodsPending"


def eviction_condition(rules: Sequence[DeviceTaintRule]) -> Condition:
    """``EvictionInProgress`` of a selector from the same condition of its rules.

    True as soon as one rule reports pods pending eviction; Unknown while some rule has not
    reported for its current generation (the devicetaint operator writes the condition within
    seconds, so this is short-lived unless that operator is not running); False otherwise.
    """

    def condition(status: str, reason: str, message: str) -> Condition:
        return Condition(type=taintrules.EVICTION_IN_PROGRESS, status=status, reason=reason, message=message)

    live = [rule for rule in rules if rule.metadata.deletion_timestamp is None]
    if not live:
        return condition(
            FALSE, REASON_NO_RULES, "No DeviceTaintRule exists for this selector, so nothing is evicted."
        )
    pending: list[str] = []
    unreported: list[str] = []
    for rule in sorted(live, key=lambda r: r.metadata.name):
        reported = rule.eviction_condition
        if reported is None or not current(reported, rule.metadata.generation):
            unreported.append(rule.metadata.name)
        elif reported.status == TRUE:
            pending.append(
                f"{rule.metadata.name}: {reported.message}" if reported.message else rule.metadata.name
            )
    total = len(live)
    if pending:
        shown = "; ".join(pending[:3]) + ("; ..." if len(pending) > 3 else "")
        return condition(
            TRUE,
            REASON_PENDING,
            f"{len(pending)} of {total} DeviceTaintRules have pods pending eviction ({shown}).",
        )
    if unreported:
        return condition(
            UNKNOWN,
            REASON_NOT_REPORTED,
            f"{len(unreported)} of {total} DeviceTaintRules have not reported EvictionInProgress.",
        )
    return condition(
        FALSE, REASON_NONE_PENDING, f"None of the {total} DeviceTaintRules has pods pending eviction."
    )
