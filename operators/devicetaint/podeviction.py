"""What to do for one pod work item, and the bodies of the writes that evict it (spec §9).

Unlike upstream, the eviction reads the pod from the watch cache instead of GETting it first: both
writes carry the cached UID as a precondition, so a pod replaced under the same name can never be hit.
A replaced or vanished pod surfaces as 409 or 404; the worker then retries (409) or reports the pod
gone (404), and the retry finds the cache caught up and stops. That saves one call per eviction,
which matters when a whole pool is tainted at once.

The worker runs a :class:`PodEvict` as: Event ``Marking for deletion``, the status PATCH (when
``status_patch`` is set), the DELETE; or nothing at all when ``already_terminating``. It then reports
the outcome back to the state with :class:`EvictionResult`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.core.conditions import TRUE, Condition, format_time, merge, same_content

from .evaluation import PodEviction
from .models import DISRUPTION_TARGET, Pod, PodItem

EVENT_REASON = "DeviceTaintManagerEviction"
EVENT_MARKING_FOR_DELETION = "Marking for deletion"
EVENT_CANCELLING_DELETION = "Cancelling deletion"

DISRUPTION_REASON = "DeletionByDeviceTaintManager"
DISRUPTION_MESSAGE = "Device Taint manager: deleting due to NoExecute taint"

EVICTED_LRU_SIZE = 500


@dataclass(frozen=True)
class PodDone:
    """Nothing (more) to do. ``forget`` also drops the schedule: the pod instance is gone."""

    why: str
    forget: bool = False


@dataclass(frozen=True)
class PodNotYet:
    """The eviction time is still ahead (it may have moved since the item was queued)."""

    delay: float


@dataclass(frozen=True)
class PodEvict:
    item: PodItem
    eviction: PodEviction
    # The pod is already terminating: count it as evicted, as upstream does, but send nothing.
    already_terminating: bool
    # None when the pod already carries our DisruptionTarget condition.
    status_patch: dict[str, Any] | None
    delete_options: dict[str, Any]


PodDecision = PodDone | PodNotYet | PodEvict


class EvictionResult(enum.Enum):
    EVICTED = "evicted"
    """PATCH and DELETE succeeded, or the pod was already terminating: counts in metrics and rules."""
    GONE = "gone"
    """404 on a write: the pod went away by itself; no metric, no count."""


def decide_pod(
    item: PodItem,
    scheduled: PodEviction | None,
    already_evicted: bool,
    cached: Pod | None,
    now: datetime,
) -> PodDecision:
    if scheduled is None:
        return PodDone("no eviction scheduled")
    if already_evicted:
        return PodDone("already evicted")
    remaining = (scheduled.when - now).total_seconds()
    if remaining > 0:
        return PodNotYet(remaining)
    if cached is None:
        return PodDone("pod no longer cached", forget=True)
    if cached.metadata.uid != item.uid:
        return PodDone("pod replaced under the same name", forget=True)
    return PodEvict(
        item=item,
        eviction=scheduled,
        already_terminating=cached.metadata.deletion_timestamp is not None,
        status_patch=disruption_target_patch(cached, now),
        delete_options=delete_options(item.uid),
    )


def disruption_target_patch(pod: Pod, now: datetime) -> dict[str, Any] | None:
    """Strategic-merge patch of ``pods/status`` adding our condition, or None if it is already there.

    ``metadata.uid`` in the body is a precondition. An existing ``True`` condition keeps its transition
    time, as the API conventions require.
    """
    existing = next((c for c in pod.status.conditions if c.type == DISRUPTION_TARGET), None)
    wanted = Condition(
        type=DISRUPTION_TARGET,
        status=TRUE,
        reason=DISRUPTION_REASON,
        message=DISRUPTION_MESSAGE,
        last_transition_time=format_time(now),
    )
    if same_content(existing, wanted):
        return None
    [condition] = merge([existing.model_dump(by_alias=True)] if existing else (), wanted)
    return {"metadata": {"uid": pod.metadata.uid}, "status": {"conditions": [condition]}}


def delete_options(uid: str) -> dict[str, Any]:
    """Plain DELETE, not the Eviction API: the seed says pods are evicted by deleting them."""
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
