"""Which devices are signalled, read from the cluster; and how long each signal has held.

Two sources (docs/device-health.md, "Signal"):

* **Slice taints.** A device of the pool's newest generation whose taint matches the policy's
  key, one of its values and one of its effects (an empty list matches any). The taint's
  ``timeAdded`` says when the signal started, so a restart loses nothing.
* **The kubelet.** ``status.containerStatuses[].allocatedResourcesStatus`` of a pod that is not
  finished, resolved to devices by :func:`operators.dra.health.device_reports` (a report that
  names no device for sure is ignored rather than guessed). The controller's first sight is the
  signal's start.

A container that crash-loops on a failed device still reports it, so a pod counts until its
phase is Succeeded or Failed, not only while a container runs.

:func:`track` carries the start of each signal and the start of each quiet spell from one pass
to the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from operators.dra import health, pools
from operators.dra.pods import TERMINAL_PHASES

from .models import AllocatedClaim, DeviceId, Pod, ResourceSlice, SliceTaintSignal

__all__ = [
    "Observed",
    "Track",
    "kubelet_signals",
    "slice_signals",
    "track",
]


@dataclass(frozen=True)
class Observed:
    """What one pass saw of a signalled device: when its signal began, if the source says, and
    which pods (``namespace/name``) report it."""

    started: datetime | None = None
    pods: frozenset[str] = field(default_factory=frozenset)


def slice_signals(signal: SliceTaintSignal, slices: Iterable[ResourceSlice]) -> dict[DeviceId, Observed]:
    found: dict[DeviceId, Observed] = {}
    for (driver, pool), members in pools.slices_by_pool(slices).items():
        for _, device in pools.pool_devices(members):
            times = [
                taint.time_added
                for taint in device.taints
                if taint.key == signal.key
                and (not signal.values or taint.value in signal.values)
                and (not signal.effects or taint.effect in signal.effects)
            ]
            if not times:
                continue
            known = [moment for moment in times if moment is not None]
            found[DeviceId(driver, pool, device.name)] = Observed(started=min(known) if known else None)
    return found


def kubelet_signals(
    health_values: frozenset[str], pods: Iterable[Pod], claims: Mapping[tuple[str, str], AllocatedClaim]
) -> dict[DeviceId, Observed]:
    """The devices some unfinished pod reports with one of ``health_values``; claims by (namespace, name)."""
    reporters: dict[DeviceId, set[str]] = {}
    for pod in pods:
        if pod.status.phase in TERMINAL_PHASES:
            continue
        for report in health.device_reports(pod, claims, health_values):
            if report.device is not None:
                reporters.setdefault(report.device, set()).add(f"{pod.namespace}/{pod.name}")
    return {device: Observed(pods=frozenset(names)) for device, names in reporters.items()}


def merge_observed(*sources: Mapping[DeviceId, Observed]) -> dict[DeviceId, Observed]:
    merged: dict[DeviceId, Observed] = {}
    for source in sources:
        for device, seen in source.items():
            before = merged.get(device)
            if before is None:
                merged[device] = seen
                continue
            starts = [moment for moment in (before.started, seen.started) if moment is not None]
            merged[device] = Observed(min(starts) if starts else None, before.pods | seen.pods)
    return merged


@dataclass(frozen=True)
class Track:
    """One device's signal over time: ``since`` while signalled, ``quiet_since`` once it stopped."""

    since: datetime | None = None
    quiet_since: datetime | None = None

    @property
    def signalled(self) -> bool:
        return self.since is not None


def track(
    previous: Mapping[DeviceId, Track],
    observed: Mapping[DeviceId, Observed],
    keep: Iterable[DeviceId],
    now: datetime,
) -> dict[DeviceId, Track]:
    """The tracks after this pass.

    A signal's start is the earliest of what the source says and what was tracked since the
    signal last cleared; without either, now. A device whose signal stopped is quiet from now
    (or from when it was first seen quiet); quiet devices are tracked only while ``keep`` (the
    devices the policy has tainted) names them, since only their rules wait for ``clearAfter``.
    A tainted device never tracked (a restart) starts quiet now: clearing is delayed, never
    hastened."""
    result: dict[DeviceId, Track] = {}
    for device, seen in observed.items():
        before = previous.get(device)
        starts = [moment for moment in (seen.started, before.since if before else None) if moment is not None]
        result[device] = Track(since=min(starts) if starts else now)
    for device in keep:
        if device in result:
            continue
        before = previous.get(device)
        quiet = before.quiet_since if before is not None and before.quiet_since is not None else now
        result[device] = Track(quiet_since=quiet)
    return result
