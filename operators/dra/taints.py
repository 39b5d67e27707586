"""Device taints, tolerations and taint selectors: the one implementation every operator uses.

Three questions are answered here, on typed data and without I/O:

* does a toleration tolerate a taint (:func:`toleration_tolerates`)? This is the general form, for any
  effect. An empty toleration effect matches every effect, as kube-scheduler reads it. The device-taint
  eviction therefore also treats an empty-effect toleration as protecting against ``NoExecute``, where
  upstream's eviction controller insists on a literal ``NoExecute`` (spec devicetaint §16, row 1): the
  scheduler deliberately let such a claim onto the tainted device, so evicting it would contradict that;
* may a device with these taints be allocated to a request with these tolerations
  (:func:`taint_prevents_allocation`)? That is the scheduler-side view: ``NoSchedule`` and ``NoExecute``
  taints must be tolerated, ``None`` and unknown effects never block;
* when must a consumer of a tainted device go (:func:`taint_eviction_time`, :func:`earliest_eviction`)?
  Only ``NoExecute`` evicts. The clock starts at the taint's ``timeAdded``, so the answer is the same
  whenever and however often it is computed: a restarted operator never extends a toleration window.

Reasons are kept generic (any hashable value): each operator decides how it names the origin of a taint.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from operators.core.conditions import time_after
from operators.core.models import KubeModel

EFFECT_NONE = "None"
EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"

OPERATOR_EXISTS = "Exists"
OPERATOR_EQUAL = "Equal"


class DeviceTaint(KubeModel):
    key: str
    value: str = ""
    effect: str = ""
    time_added: datetime | None = None


class DeviceToleration(KubeModel):
    key: str = ""
    # kube-apiserver defaults the operator to Equal; an empty one still means Equal.
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class NamedDevices(Protocol):
    """What selects devices by their names: a DeviceTaintRule's selector, or the names of a project
    resource's wider selection (:class:`operators.dra.selection.DeviceSelection`)."""

    @property
    def driver(self) -> str | None: ...

    @property
    def pool(self) -> str | None: ...

    @property
    def device(self) -> str | None: ...


class DeviceTaintSelector(KubeModel):
    """``DeviceTaintRule.spec.deviceSelector``: every field that is set must match."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


def toleration_tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """Whether ``toleration`` tolerates ``taint``, whatever the taint's effect."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == OPERATOR_EXISTS:
        return True
    if toleration.operator in ("", OPERATOR_EQUAL):
        return toleration.value == taint.value
    # An operator this code does not know must not silently tolerate anything.
    return False


def taint_tolerated(tolerations: Iterable[DeviceToleration], taint: DeviceTaint) -> bool:
    return any(toleration_tolerates(toleration, taint) for toleration in tolerations)


def taint_prevents_allocation(taints: Iterable[DeviceTaint], tolerations: Sequence[DeviceToleration]) -> bool:
    """Whether a device with ``taints`` is unusable for a request with ``tolerations``."""
    return any(
        taint.effect in (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE) and not taint_tolerated(tolerations, taint)
        for taint in taints
    )


def selector_matches(selector: NamedDevices | None, driver: str, pool: str, device: str) -> bool:
    """Each name the selector sets must match. A missing selector matches no device; an empty one
    matches every device."""
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == driver)
        and (selector.pool is None or selector.pool == pool)
        and (selector.device is None or selector.device == device)
    )


def taint_eviction_time(tolerations: Iterable[DeviceToleration], taint: DeviceTaint) -> datetime | None:
    """When a consumer with ``tolerations`` must be evicted because of ``taint``; None means never.

    Never: the effect is not ``NoExecute``, the taint has no ``timeAdded`` (kube-apiserver always sets
    it, and upstream leaves the case undefined), or some tolerating toleration has no
    ``tolerationSeconds``. Otherwise the smallest ``tolerationSeconds`` of the tolerating tolerations
    (negative counts as 0) is added to ``timeAdded``; without any tolerating toleration it is
    ``timeAdded`` itself.
    """
    if taint.effect != EFFECT_NO_EXECUTE or taint.time_added is None:
        return None
    shortest: int | None = None
    for toleration in tolerations:
        if not toleration_tolerates(toleration, taint):
            continue
        if toleration.toleration_seconds is None:
            return None
        seconds = max(toleration.toleration_seconds, 0)
        shortest = seconds if shortest is None else min(shortest, seconds)
    if shortest is None:
        return taint.time_added
    return time_after(taint.time_added, shortest)


Reason = TypeVar("Reason", bound=Hashable)


@dataclass(frozen=True)
class Eviction(Generic[Reason]):
    """The earliest time some consumer must go, and every taint that requires it to go.

    ``reasons`` holds all non-ignored taints, not only the one that set ``when``: a rule whose
    toleration window is still running counts its consumer as pending.
    """

    when: datetime
    reasons: frozenset[Reason]


def earliest_eviction(
    pairs: Iterable[tuple[Sequence[DeviceToleration], DeviceTaint, Reason]],
) -> Eviction[Reason] | None:
    """Combine (tolerations, taint, reason) pairs, one per allocated device and taint, into one eviction."""
    when: datetime | None = None
    reasons: set[Reason] = set()
    for tolerations, taint, reason in pairs:
        moment = taint_eviction_time(tolerations, taint)
        if moment is None:
            continue
        reasons.add(reason)
        when = moment if when is None else min(when, moment)
    if when is None:
        return None
    return Eviction(when=when, reasons=frozenset(reasons))


def merge_evictions(evictions: Iterable[Eviction[Reason] | None]) -> Eviction[Reason] | None:
    """The earliest time and the union of the reasons; None when no eviction is given."""
    merged: Eviction[Reason] | None = None
    for eviction in evictions:
        if eviction is None:
            continue
        if merged is None:
            merged = eviction
        else:
            merged = Eviction(when=min(merged.when, eviction.when), reasons=merged.reasons | eviction.reasons)
    return merged
