"""What a ``NoExecute`` taint would do to the devices an ``effect: None`` selector selects.

A selector taints each device through a rule of its own, and the devicetaint operator reports a dry
run per rule; adding those up counts a pod once per selected device it uses. This module counts over
the whole selection instead, so that each pod, claim and namespace is counted once:

* published devices: the devices the selector selects;
* allocated devices: those of them some claim is allocated on;
* claims: the claims allocated on at least one of them;
* pods: the pods a claim is reserved for, when one of that claim's results on a selected device does
  not tolerate the taint read as ``NoExecute`` (a toleration with ``tolerationSeconds`` only delays
  the eviction, so it still counts, as in the rules' dry run);
* namespaces: those of the counted pods.

Pods are the claims' ``reservedFor`` pod entries: kube-scheduler reserves a claim for each pod that
uses it, and the resourceclaim controller removes the entries of pods that are gone. PodGroup
entries are not pods and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from operators.core.models import camel_fields
from operators.dra import claims
from operators.dra.taints import EFFECT_NO_EXECUTE, DeviceTaint, taint_eviction_time

from .models import DeviceId

AllocatedClaim = claims.ResourceClaim[claims.AllocationResult[claims.ResultWithTolerations]]
"""A claim as the dry run reads it: its allocated devices with their tolerations, its consumers."""

REASON_NO_EFFECT = "NoEffect"
"""As the devicetaint operator's rules report their dry run."""

_SOME_TIME = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class DryRun:
    published_devices: int
    allocated_devices: int
    claims: int
    pods: int
    namespaces: int

    @property
    def message(self) -> str:
        """The rules' dry-run wording where it applies; this one is kept current, so it says nothing
        about not being updated."""
        return " ".join(
            (
                _count(self.published_devices, "published device selected.", "published devices selected."),
                _count(self.allocated_devices, "allocated device selected.", "allocated devices selected."),
                _count(self.claims, "claim is allocated on them.", "claims are allocated on them."),
                _count(self.pods, "pod would be evicted in", "pods would be evicted in"),
                _count(self.namespaces, "namespace", "different namespaces"),
                "if the effect was NoExecute.",
            )
        )

    def as_status(self) -> dict[str, int]:
        return camel_fields(self)


def _count(number: int, singular: str, plural: str) -> str:
    return f"1 {singular}" if number == 1 else f"{number} {plural}"


def dry_run(taint: DeviceTaint, selected: Iterable[DeviceId], allocated: Iterable[AllocatedClaim]) -> DryRun:
    devices = set(selected)
    # Read as NoExecute; a time is needed only to ask whether a toleration lets the consumer stay.
    as_no_execute = taint.model_copy(
        update={"effect": EFFECT_NO_EXECUTE, "time_added": taint.time_added or _SOME_TIME}
    )
    allocated_devices: set[DeviceId] = set()
    claim_count = 0
    pods: set[str] = set()
    namespaces: set[str] = set()
    for claim in allocated:
        hits = claims.results_on(claim, devices)
        if not hits:
            continue
        claim_count += 1
        allocated_devices.update(DeviceId(r.driver, r.pool, r.device) for r in hits)
        if all(taint_eviction_time(r.tolerations, as_no_execute) is None for r in hits):
            continue
        for consumer in claim.status.reserved_for:
            if consumer.is_pod:
                pods.add(consumer.uid)
                namespaces.add(claim.namespace)
    return DryRun(len(devices), len(allocated_devices), claim_count, len(pods), len(namespaces))
