"""What ``kubectl dra taint-preview`` computes and prints. Pure functions over the API's JSON.

Two sources are combined:

* the devicetaint operator's own dry run: the counts in the ``EvictionInProgress`` condition of a
  DeviceTaintRule with effect ``None`` (published devices, allocated devices, pods, namespaces),
  which are authoritative because they come from the component that would do the evicting;
* the names behind those counts, read from the API here: the published devices the selector
  matches (newest generation of each pool), the allocated claims with a matching result, and the
  scheduled pods those claims are reserved for, each with when it would be evicted given the
  tolerations in its allocation results (the rules of :mod:`operators.dra.taints`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.dra.claims import AllocationResult, ConsumerReference, ResourceClaim, ResultWithTolerations
from operators.dra.pools import DeviceId, visible_devices
from operators.dra.slices import ResourceSlice, SliceDevice
from operators.dra.taints import (
    EFFECT_NO_EXECUTE,
    DeviceTaint,
    DeviceTaintSelector,
    DeviceToleration,
    selector_matches,
    taint_eviction_time,
)

from .errors import UsageError
from .tables import table

SELECTOR_KEYS = ("driver", "pool", "device")
TolerationsClaim = ResourceClaim[AllocationResult[ResultWithTolerations]]
MAX_DEVICE_ROWS = 20
_DRY_RUN = re.compile(
    r"(\d+) published devices? selected\. (\d+) allocated devices? selected\. "
    r"(\d+) pods? would be evicted in (\d+) (?:different )?namespaces? if the effect was NoExecute\."
)


def parse_selector(text: str) -> DeviceTaintSelector:
    """``driver=D,pool=P,device=X`` (any non-empty subset), or a bare driver name."""
    text = text.strip()
    if not text:
        raise UsageError("the selector is empty: give driver=D, pool=P and/or device=X")
    if "=" not in text:
        return DeviceTaintSelector(driver=text)
    values: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in SELECTOR_KEYS:
            raise UsageError(f"invalid selector part {part!r}: expected one of driver=, pool=, device=")
        if not value:
            raise UsageError(f"invalid selector part {part!r}: {key} needs a value")
        if key in values:
            raise UsageError(f"invalid selector: {key} is given twice")
        values[key] = value
    return DeviceTaintSelector(**values)


def selector_fields(selector: DeviceTaintSelector) -> dict[str, str]:
    return {k: v for k in SELECTOR_KEYS if (v := getattr(selector, k)) is not None}


def selector_text(selector: DeviceTaintSelector) -> str:
    return ",".join(f"{k}={v}" for k, v in selector_fields(selector).items())


@dataclass(frozen=True)
class DryRun:
    published: int
    allocated: int
    pods: int
    namespaces: int
    summary: str
    """The operator's sentences without the note about not updating, which a deleted rule makes moot."""


def parse_dry_run(message: str) -> DryRun | None:
    found = _DRY_RUN.search(message)
    if found is None:
        return None
    published, allocated, pods, namespaces = (int(g) for g in found.groups())
    return DryRun(published, allocated, pods, namespaces, found.group(0))


Selection = DeviceTaintSelector | frozenset[DeviceId]
"""What a taint selects: a rule's driver/pool/device, or the exact devices a DeviceTaintSelector's
class or CEL expressions chose (as the taintselector operator expanded them)."""


def selection_matches(selection: Selection, driver: str, pool: str, device: str) -> bool:
    if isinstance(selection, DeviceTaintSelector):
        return selector_matches(selection, driver, pool, device)
    return DeviceId(driver, pool, device) in selection


def published_devices(slices: Iterable[Mapping[str, Any]], selection: Selection) -> list[DeviceId]:
    """Matching devices of the newest generation of every pool, as the operator counts them."""
    parsed = [ResourceSlice[SliceDevice].model_validate(s) for s in slices]
    return sorted(
        DeviceId(driver, pool, device)
        for ((driver, pool), device) in visible_devices(parsed)
        if selection_matches(selection, driver, pool, device)
    )


@dataclass(frozen=True)
class ClaimRow:
    namespace: str
    name: str
    devices: tuple[DeviceId, ...]
    eviction: float | None
    """Seconds after the taint until the claim's consumers are evicted; None: never."""
    consumers: tuple[ConsumerReference, ...]
    """The ``reservedFor`` entries that are pods."""


def _seconds(tolerations: Sequence[DeviceToleration], taint: DeviceTaint, now: datetime) -> float | None:
    when = taint_eviction_time(tolerations, taint)
    return None if when is None else max((when - now).total_seconds(), 0.0)


def _earliest(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def affected_claims(
    claims: Iterable[Mapping[str, Any]], selection: Selection, taint: DeviceTaint, now: datetime
) -> list[ClaimRow]:
    """Allocated claims with a result on a selected device; ``taint`` carries the effect to judge."""
    rows = []
    for body in claims:
        claim = TolerationsClaim.model_validate(body)
        allocation = claim.status.allocation
        matching = [
            r
            for r in (allocation.devices.results if allocation else ())
            if selection_matches(selection, r.driver, r.pool, r.device)
        ]
        if not matching:
            continue
        consumers = tuple(c for c in claim.status.reserved_for if c.is_pod)
        rows.append(
            ClaimRow(
                claim.namespace,
                claim.name,
                tuple(DeviceId(r.driver, r.pool, r.device) for r in matching),
                _earliest(_seconds(r.tolerations, taint, now) for r in matching),
                consumers,
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name))


@dataclass(frozen=True)
class PodRow:
    namespace: str
    name: str
    node: str
    claims: tuple[str, ...]
    eviction: float | None


def affected_pods(
    claims: Sequence[ClaimRow], pods: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[PodRow]:
    """Scheduled pods a claim is reserved for (matched by UID, so a re-created pod does not count)."""
    by_pod: dict[tuple[str, str], list[ClaimRow]] = {}
    for claim in claims:
        for consumer in claim.consumers:
            pod = pods.get((claim.namespace, consumer.name))
            if pod is None or pod["metadata"].get("uid") != consumer.uid:
                continue
            if not (pod.get("spec") or {}).get("nodeName"):
                continue
            by_pod.setdefault((claim.namespace, consumer.name), []).append(claim)
    rows = [
        PodRow(
            namespace,
            name,
            pods[(namespace, name)]["spec"]["nodeName"],
            tuple(c.name for c in found),
            _earliest(c.eviction for c in found),
        )
        for (namespace, name), found in by_pod.items()
    ]
    return sorted(rows, key=lambda r: (r.namespace, r.name))


DEVICETAINT_DRY_RUN = "devicetaint operator (dry run)"


@dataclass(frozen=True)
class Preview:
    selector: DeviceTaintSelector
    taint: DeviceTaint
    dry_run: DryRun
    devices: Sequence[DeviceId]
    claims: Sequence[ClaimRow]
    pods: Sequence[PodRow]
    source: str = DEVICETAINT_DRY_RUN
    target: Mapping[str, Any] | None = None
    """What was selected when it is more than a driver, pool and device (a class, CEL) ..."""
    target_label: str | None = None
    """... and how it reads."""

    @property
    def target_fields(self) -> dict[str, Any]:
        return dict(self.target) if self.target is not None else selector_fields(self.selector)

    @property
    def target_text(self) -> str:
        return self.target_label or selector_text(self.selector)


def by_namespace(preview: Preview) -> list[tuple[str, int, int]]:
    """(namespace, claims, pods) for every namespace with an affected claim."""
    namespaces = sorted({c.namespace for c in preview.claims})
    return [
        (
            ns,
            sum(1 for c in preview.claims if c.namespace == ns),
            sum(1 for p in preview.pods if p.namespace == ns),
        )
        for ns in namespaces
    ]


def in_namespace(preview: Preview, namespace: str | None) -> Preview:
    """Only the claims and pods of ``namespace`` (None: all); devices and counts stay cluster-wide."""
    if namespace is None:
        return preview
    return dataclasses.replace(
        preview,
        claims=[c for c in preview.claims if c.namespace == namespace],
        pods=[p for p in preview.pods if p.namespace == namespace],
    )


def taint_text(taint: DeviceTaint) -> str:
    return f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"


def document(preview: Preview) -> dict[str, Any]:
    d = preview.dry_run
    return {
        "selector": preview.target_fields,
        "taint": {"key": preview.taint.key, "value": preview.taint.value, "effect": preview.taint.effect},
        "dryRun": {
            "publishedDevices": d.published,
            "allocatedDevices": d.allocated,
            "pods": d.pods,
            "namespaces": d.namespaces,
            "message": d.summary,
        },
        "devices": [{"driver": x.driver, "pool": x.pool, "device": x.device} for x in preview.devices],
        "claims": [
            {
                "namespace": c.namespace,
                "name": c.name,
                "devices": [{"driver": x.driver, "pool": x.pool, "device": x.device} for x in c.devices],
                "evictionAfterSeconds": c.eviction,
            }
            for c in preview.claims
        ],
        "pods": [
            {
                "namespace": p.namespace,
                "name": p.name,
                "nodeName": p.node,
                "claims": list(p.claims),
                "evictionAfterSeconds": p.eviction,
            }
            for p in preview.pods
        ],
    }


def _when(seconds: float | None, effect: str) -> str:
    if effect != EFFECT_NO_EXECUTE:
        return f"none ({effect})"
    if seconds is None:
        return "never (tolerated)"
    return "at once" if seconds == 0 else f"after {seconds:g}s"


def render(preview: Preview) -> str:
    effect = preview.taint.effect
    lines = [
        f"Preview of taint {taint_text(preview.taint)} on {preview.target_text}",
        f"{preview.source}: {preview.dry_run.summary}",
    ]
    if effect != EFFECT_NO_EXECUTE:
        lines.append(f"With effect {effect} no pod is evicted: the devices only stop taking new claims.")
    lines.append("")
    shown = preview.devices[:MAX_DEVICE_ROWS]
    lines += table(("DRIVER", "POOL", "DEVICE"), [(x.driver, x.pool, x.device) for x in shown])
    if len(preview.devices) > len(shown):
        lines.append(f"... and {len(preview.devices) - len(shown)} more devices (-o json lists all)")
    if preview.claims:
        claim_rows = [
            (
                f"{c.namespace}/{c.name}",
                ",".join(f"{x.pool}/{x.device}" for x in c.devices),
                _when(c.eviction, effect),
            )
            for c in preview.claims
        ]
        lines += ["", *table(("CLAIM", "DEVICES", "EVICTION"), claim_rows)]
    if preview.pods:
        pod_rows = [
            (f"{p.namespace}/{p.name}", p.node, ",".join(p.claims), _when(p.eviction, effect))
            for p in preview.pods
        ]
        lines += ["", *table(("POD", "NODE", "CLAIMS", "EVICTION"), pod_rows)]
    return "\n".join(lines) + "\n"
