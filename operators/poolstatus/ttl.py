"""When a request expires (spec section 13).

Requests are one-shot, so they would pile up forever; the controller deletes a done
request one ``completedTTL`` after its status was written, and a pending one
``pendingTTL`` after creation. The reference time of a done request is the
``lastTransitionTime`` of its first ``Complete`` or ``Failed`` condition (the status is
write-once, so that is when it was written); without such a condition, its creation time.

Times on the API have whole-second precision, so the comparison uses whole seconds and
is strict: a request exactly one TTL old is kept. A missing or zero reference time never
expires, as upstream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from operators.core.conditions import parse_time_or_none, time_after

from .models import ResourcePoolStatusRequest
from .status import CONDITION_COMPLETE, CONDITION_FAILED

DEFAULT_COMPLETED_TTL = timedelta(hours=1)
DEFAULT_PENDING_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class TtlDecision:
    delete: bool
    state: Literal["completed", "pending"]
    """Which TTL applied; also the ``state`` label of the deletion metric."""
    requeue_after: float | None
    """Seconds until the request expires when it is kept; None when it never expires."""


def reference_time(request: ResourcePoolStatusRequest) -> datetime | None:
    if request.status is not None:
        for condition in request.status.conditions or ():
            if condition.type in (CONDITION_COMPLETE, CONDITION_FAILED):
                return parse_time_or_none(condition.last_transition_time)
    return parse_time_or_none(request.metadata.creation_timestamp)


def ttl_action(
    request: ResourcePoolStatusRequest,
    now: datetime,
    completed_ttl: timedelta = DEFAULT_COMPLETED_TTL,
    pending_ttl: timedelta = DEFAULT_PENDING_TTL,
) -> TtlDecision:
    """Whether the sweep at ``now`` (timezone-aware) deletes ``request``."""
    state: Literal["completed", "pending"] = "completed" if request.status is not None else "pending"
    ttl = completed_ttl if state == "completed" else pending_ttl
    since = reference_time(request)
    if since is None:
        return TtlDecision(delete=False, state=state, requeue_after=None)
    age_seconds = math.floor((now - since).total_seconds())
    ttl_seconds = math.floor(ttl.total_seconds())
    if age_seconds > ttl_seconds:
        return TtlDecision(delete=True, state=state, requeue_after=None)
    expires_at = time_after(since, ttl_seconds + 1)
    return TtlDecision(delete=False, state=state, requeue_after=(expires_at - now).total_seconds())
