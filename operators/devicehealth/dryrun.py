"""The pods a policy's taint would evict: for the dry run's status and for Events on pods.

A pod is one a claim allocated on the device is reserved for, unless every result of that claim
on the affected devices tolerates the taint read as ``NoExecute`` (a toleration with
``tolerationSeconds`` only delays the eviction, so it still counts). A pod that uses several
affected devices is counted once (docs/device-health.md, "Dry run").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from operators.core.events import ObjectRef
from operators.dra.api import GROUP, VERSION
from operators.dra.claims import results_on
from operators.dra.taints import EFFECT_NO_EXECUTE, DeviceTaint, taint_eviction_time

from .models import AllocatedClaim, DeviceId

__all__ = ["Affected", "affected"]

_SOME_TIME = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Affected:
    pods: tuple[ObjectRef, ...]
    """Sorted by namespace and name, each pod once."""
    claims: tuple[ObjectRef, ...]


def affected(
    taint_key: str, taint_value: str, devices: Iterable[DeviceId], claims: Iterable[AllocatedClaim]
) -> Affected:
    wanted = set(devices)
    taint = DeviceTaint(key=taint_key, value=taint_value, effect=EFFECT_NO_EXECUTE, time_added=_SOME_TIME)
    pods: dict[str, ObjectRef] = {}
    claim_refs: list[ObjectRef] = []
    for claim in claims:
        hits = results_on(claim, wanted)
        if not hits:
            continue
        claim_refs.append(
            ObjectRef(f"{GROUP}/{VERSION}", "ResourceClaim", claim.name, claim.namespace, claim.uid)
        )
        if all(taint_eviction_time(r.tolerations, taint) is None for r in hits):
            continue
        for consumer in claim.status.reserved_for:
            if consumer.is_pod:
                pods[consumer.uid or f"{claim.namespace}/{consumer.name}"] = ObjectRef(
                    "v1", "Pod", consumer.name, claim.namespace, consumer.uid
                )
    ordered = sorted(pods.values(), key=lambda ref: (ref.namespace or "", ref.name))
    return Affected(
        tuple(ordered), tuple(sorted(claim_refs, key=lambda ref: (ref.namespace or "", ref.name)))
    )
