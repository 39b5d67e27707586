"""The DeviceTaintRules a policy owns: one per tainted device (docs/device-health.md, "Action").

Each rule is the DRA domain's owned rule (:func:`operators.dra.taintrules.owned_rule`): named
``<policy>-<digest of the device>`` so that a device keeps its rule across restarts, controlled by
the policy so that deleting the policy deletes its rules, selecting exactly driver, pool and device.

The taint is ``dra-operators.io/device-health=Unhealthy``, so that a workload can tolerate it.
Upstream's DeviceTaint has no ``tolerationSeconds``; a policy's ``tolerationSeconds`` is therefore
the time a new ``NoExecute`` rule spends as ``NoSchedule`` first (new claims are kept off at once,
running pods get the window), after which it is patched to ``NoExecute``. kube-apiserver restarts
the taint's ``timeAdded`` on that patch, which is when eviction starts.

``dra-operators.io/evictions-per-minute`` carries ``evictionsPerMinute`` to devicetaint, which
paces the policy's evictions by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.core.conditions import time_after
from operators.dra import taintrules
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE

from .models import API_VERSION, KIND, DeviceId, DeviceTaintRule, HealthPolicy
from .validation import ValidSpec

__all__ = [
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "POLICY_NAME_ANNOTATION",
    "POLICY_UID_LABEL",
    "TAINT_KEY",
    "TAINT_VALUE",
    "EffectNow",
    "desired_rule",
    "effect_now",
    "rule_patch",
]

TAINT_KEY = "dra-operators.io/device-health"
TAINT_VALUE = "Unhealthy"
POLICY_NAME_ANNOTATION = "dra-operators.io/health-policy"
POLICY_UID_LABEL = "dra-operators.io/health-policy-uid"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "dra-operators-devicehealth"


@dataclass(frozen=True)
class EffectNow:
    effect: str
    until: datetime | None = None
    """When the effect is to change (the end of the tolerationSeconds window)."""


def effect_now(spec: ValidSpec, rule: DeviceTaintRule | None, now: datetime) -> EffectNow:
    """The effect a rule of this policy should carry now."""
    window = spec.toleration_seconds
    if spec.effect != EFFECT_NO_EXECUTE or not window:
        return EffectNow(spec.effect)
    if rule is None:
        return EffectNow(EFFECT_NO_SCHEDULE, time_after(now, window))
    if rule.spec.taint.effect == EFFECT_NO_EXECUTE:
        return EffectNow(EFFECT_NO_EXECUTE)
    # A rule not yet seen with its timeAdded waits a whole window from now rather than evicting early.
    start = rule.spec.taint.time_added or now
    end = time_after(start, window)
    return EffectNow(EFFECT_NO_EXECUTE) if now >= end else EffectNow(EFFECT_NO_SCHEDULE, end)


def _annotations(policy: HealthPolicy, spec: ValidSpec) -> dict[str, str]:
    annotations = {POLICY_NAME_ANNOTATION: policy.metadata.name}
    if spec.evictions_per_minute is not None:
        annotations[taintrules.EVICTIONS_PER_MINUTE] = str(spec.evictions_per_minute)
    return annotations


def desired_rule(
    policy: HealthPolicy, spec: ValidSpec, device: DeviceId, effect: str, api_version: str
) -> dict[str, Any]:
    owner = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": policy.metadata.name,
        "uid": policy.metadata.uid,
    }
    return taintrules.owned_rule(
        name=taintrules.owned_rule_name(policy.metadata.name, device),
        api_version=api_version,
        owner=owner,
        device=device,
        taint=taintrules.taint_body(TAINT_KEY, TAINT_VALUE, effect),
        labels={MANAGED_BY_LABEL: MANAGED_BY, POLICY_UID_LABEL: policy.metadata.uid},
        annotations=_annotations(policy, spec),
    )


def rule_patch(policy: HealthPolicy, spec: ValidSpec, rule: DeviceTaintRule, effect: str) -> dict[str, Any]:
    """The merge patch that brings an owned rule to the policy's taint and pacing; empty when none."""
    patch: dict[str, Any] = {}
    taint = rule.spec.taint
    if (taint.key, taint.value, taint.effect) != (TAINT_KEY, TAINT_VALUE, effect):
        patch["spec"] = {"taint": taintrules.taint_body(TAINT_KEY, TAINT_VALUE, effect)}
    pace = rule.metadata.annotations.get(taintrules.EVICTIONS_PER_MINUTE)
    wanted = None if spec.evictions_per_minute is None else str(spec.evictions_per_minute)
    if pace != wanted:
        # null removes the annotation in a merge patch.
        patch["metadata"] = {"annotations": {taintrules.EVICTIONS_PER_MINUTE: wanted}}
    return patch
