"""What to do for one pod work item, and the bodies of the writes that evict it (spec §9).

Unlike upstream, the eviction reads the pod from the watch cache instead of GETting it first: both
writes carry the cached UID as a precondition, so a pod replaced under the same name can never be hit.
A vanished pod surfaces as 404, and so does a replaced one at the status PATCH (the executor counts the
server's refusal to change ``metadata.uid`` as a 404): the worker reports the pod gone. A DELETE that
meets a replacement answers 409; the worker retries, and the retry finds the cache caught up and
stops. That saves one call per eviction, which matters when a whole pool is tainted at once.

:func:`pod_plan` turns a :class:`PodEvict` into the writes: Event ``Marking for deletion``, the status
PATCH (when ``status_patch`` is set), the DELETE; or nothing at all when ``already_terminating``. The
worker executes it and reports the outcome back to the state with :class:`EvictionResult`.

With ``--eviction-mode=evict`` the plan asks the Eviction API instead: the API
server checks the pod's PodDisruptionBudgets and sets ``DisruptionTarget`` itself (reason
``EvictionByEvictionAPI``), so no status PATCH is sent; marking a pod that its budget then keeps would
be a lie. A refusal by a budget (429 with a ``DisruptionBudget`` cause, :func:`blocking_budget`) leaves
the eviction scheduled: the pod still counts as pending in the rule's condition, and is tried again.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from operators.core.backoff import Backoff
from operators.core.client import STRATEGIC_MERGE_PATCH, ApiError
from operators.core.conditions import TRUE, Condition, format_time, merge, same_content
from operators.core.events import NORMAL, ObjectRef
from operators.core.keys import Key
from operators.core.plan import Delete, Evict, Patch, Plan, RecordEvent
from operators.core.reconcile import Done, Requeue, Result
from operators.core.resources import PODS

from .evaluation import PodEviction
from .models import DISRUPTION_TARGET, Pod

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
    item: Key
    eviction: PodEviction
    # The pod is already terminating: count it as evicted, as upstream does, but send nothing.
    already_terminating: bool
    # None when the pod already carries our DisruptionTarget condition.
    status_patch: dict[str, Any] | None


PodDecision = PodDone | PodNotYet | PodEvict


class EvictionResult(enum.Enum):
    EVICTED = "evicted"
    """PATCH and DELETE succeeded, or the pod was already terminating: counts in metrics and rules."""
    GONE = "gone"
    """404 on a write: the pod went away by itself; no metric, no count."""


def decide_pod(
    item: Key,
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
    )


def disruption_target_patch(pod: Pod, now: datetime) -> dict[str, Any] | None:
    """Strategic-merge patch of ``pods/status`` adding our condition, or None if it is already there.

    An existing ``True`` condition keeps its transition time, as the API conventions require.
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
    return {"status": {"conditions": [condition]}}


BUDGET_RETRY = Backoff(initial=1.0, factor=2.0, maximum=30.0)
"""A budget is released by other pods becoming ready, which nothing here watches: the retries back off,
but never beyond half a minute, so a pod goes soon after its budget allows it (kubectl drain: 5 s)."""

EVENT_BLOCKED_BY_BUDGET = (
    "Cannot evict pod: its PodDisruptionBudget {budget} allows no disruption now ({detail}); retrying"
)

# The API server's cause message: "The disruption budget <name> needs <n> healthy pods and has <m> currently".
_BUDGET_NAME = re.compile(r"disruption budget (?P<name>\S+)")


@dataclass(frozen=True)
class BudgetRefusal:
    """A PodDisruptionBudget that keeps the pod for now."""

    budget: str
    detail: str
    retry_after: float | None = None

    @property
    def event_message(self) -> str:
        return EVENT_BLOCKED_BY_BUDGET.format(budget=self.budget, detail=self.detail)


def budget_retry_delay(refusals: int, retry_after: float | None) -> float:
    """Seconds until the next eviction attempt after ``refusals`` refusals in a row (1 for the first)."""
    return max(BUDGET_RETRY.delay(refusals - 1), retry_after or 0.0)


def blocking_budget(status: Mapping[str, Any]) -> BudgetRefusal | None:
    """The budget named by a 429 answer of the Eviction API, or None for any other 429 (a busy API
    server). The Status's ``details.causes`` carries a ``DisruptionBudget`` cause per refusal."""
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    for cause in causes if isinstance(causes, list) else ():
        if not isinstance(cause, Mapping) or cause.get("reason") != "DisruptionBudget":
            continue
        detail = str(cause.get("message") or "")
        match = _BUDGET_NAME.search(detail)
        return BudgetRefusal(match.group("name") if match else "(unnamed)", detail)
    return None


def budget_refusal(err: ApiError) -> BudgetRefusal | None:
    """The budget that refused an eviction, or None for any other error (a busy API server's 429)."""
    refusal = blocking_budget(err.body) if err.status in (403, 429) else None
    return None if refusal is None else replace(refusal, retry_after=err.retry_after)


@dataclass(frozen=True)
class EvictionEnds:
    """The Eviction API answers that end a pod's plan: 404, the pod is gone; a budget's refusal,
    retried after the backoff of one more refusal than ``refusals``. Any other error is raised."""

    refusals: int

    def __call__(self, err: ApiError) -> Result | None:
        if err.not_found:
            return Done()
        refusal = budget_refusal(err)
        if refusal is None:
            return None
        return Requeue(budget_retry_delay(self.refusals + 1, refusal.retry_after), "PodDisruptionBudget")


def pod_ref(item: Key) -> ObjectRef:
    return ObjectRef("v1", "Pod", item.name, item.namespace, item.uid)


# A 404 means the pod went away by itself (or, at the status PATCH, was replaced); a 409 (the DELETE's UID
# precondition) is retried like any error, and the retry finds the cache caught up.
_GONE = {404: Done()}
_RAISE: frozenset[int] = frozenset()


def pod_plan(decision: PodDecision, *, eviction_api: bool, refusals: int) -> Plan:
    """The writes of one pod work item. ``refusals``: the budget refusals in a row so far."""
    if isinstance(decision, PodDone):
        return Plan()
    if isinstance(decision, PodNotYet):
        return Plan(result=Requeue(decision.delay, "eviction not due yet"))
    if decision.already_terminating:
        return Plan()
    item = decision.item
    marking = RecordEvent(pod_ref(item), NORMAL, EVENT_REASON, EVENT_MARKING_FOR_DELETION)
    if eviction_api:
        # The Event follows the accepted eviction: a pod its budget keeps is never announced as marked.
        evict = Evict(item.namespace, item.name, item.uid, tolerate=_RAISE, ends=EvictionEnds(refusals))
        return Plan((evict, marking))
    path = PODS.path(item.name, namespace=item.namespace)
    # Plain DELETE, not the Eviction API: the seed says pods are evicted by deleting them.
    delete = Delete(path, item.uid, tolerate=_RAISE, ends=_GONE)
    if decision.status_patch is None:
        return Plan((marking, delete))
    status = f"{path}/status"
    patch = Patch(
        status, decision.status_patch, STRATEGIC_MERGE_PATCH, tolerate=_RAISE, ends=_GONE, uid=item.uid
    )
    return Plan((marking, patch, delete))
