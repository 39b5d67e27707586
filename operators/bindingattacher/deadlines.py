"""Deadlines, call budgets and backoff (spec §3.5 and §12).

All attach deadlines are anchored at ``allocationTimestamp``, the start of kube-scheduler's
claim clock, because that is the earliest deadline the attacher can face: a second pod joining
an allocated claim only gets the remaining time. The attach deadline ends a safety margin
before the scheduler's, so a failure written at the deadline reaches the scheduler's next poll
and the pod's message names our reason (``AttachTimeout``) instead of a generic timeout.

Backoff is exponential with ±20 % jitter. The random source is a parameter so that the
functions stay deterministic under test.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from operators.dra.durations import format_seconds

from .models import WaitingFor

MIN_CALL_BUDGET = timedelta(seconds=1)
"""No attach call starts with less budget than this; the record fails with AttachTimeout."""

JITTER = 0.2


def attach_deadline(
    allocation_timestamp: datetime, binding_timeout: timedelta, safety_margin: timedelta
) -> datetime:
    return allocation_timestamp + binding_timeout - safety_margin


def scheduler_deadline(allocation_timestamp: datetime, binding_timeout: timedelta) -> datetime:
    return allocation_timestamp + binding_timeout


def remaining(deadline: datetime, now: datetime) -> timedelta:
    return max(deadline - now, timedelta(0))


def can_start_attach(deadline: datetime, now: datetime) -> bool:
    return deadline - now >= MIN_CALL_BUDGET


def attach_call_timeout(action_timeout: timedelta, deadline: datetime, now: datetime) -> float:
    """Seconds an attach or probe call may take: the action timeout, cut to the remaining budget."""
    return min(action_timeout, remaining(deadline, now)).total_seconds()


@dataclass(frozen=True)
class Backoff:
    initial: float
    factor: float
    maximum: float

    def delay(self, retries: int, rand: Callable[[], float] = random.random) -> float:
        """Delay before retry number ``retries`` (0 for the first retry), jittered by ±20 %."""
        base = min(self.initial * self.factor ** max(retries, 0), self.maximum)
        return base * (1 - JITTER + 2 * JITTER * rand())


ATTACH_RETRY = Backoff(initial=1.0, factor=2.0, maximum=30.0)
IN_PROGRESS = Backoff(initial=2.0, factor=1.5, maximum=15.0)
DETACH_RETRY = Backoff(initial=5.0, factor=2.0, maximum=300.0)
STATUS_WRITE = Backoff(initial=0.5, factor=2.0, maximum=10.0)
LEDGER_WRITE = Backoff(initial=0.5, factor=2.0, maximum=30.0)


def in_progress_backoff(retry_after_seconds: float | None) -> Backoff:
    """``InProgress`` polls start at the action's ``retryAfterSeconds`` when it gives one."""
    if retry_after_seconds is None or retry_after_seconds <= 0:
        return IN_PROGRESS
    return Backoff(
        initial=retry_after_seconds, factor=IN_PROGRESS.factor, maximum=max(retry_after_seconds, 15.0)
    )


def bounded_delay(delay: float, deadline: datetime, now: datetime) -> float:
    """A retry delay that never sleeps past the deadline (the deadline check then fires)."""
    return max(min(delay, remaining(deadline, now).total_seconds()), 0.0)


def timeout_message(
    waiting_for: WaitingFor,
    *,
    waited: timedelta,
    max_attaches: int | None = None,
    previous_key: str | None = None,
    last_error: str = "",
) -> str:
    """The failure message for ``AttachTimeout``; it names what was being waited for (§12.1)."""
    after = format_seconds(waited)
    if waiting_for is WaitingFor.SLOT:
        limit = f" (maxAttaches={max_attaches})" if max_attaches is not None else ""
        return f"timed out after {after} waiting for a free attach slot{limit}"
    if waiting_for is WaitingFor.PREVIOUS_DETACH:
        previous = f" {previous_key}" if previous_key else ""
        return f"timed out waiting for detach of previous attachment{previous} of this device"
    if waiting_for is WaitingFor.NODE:
        return f"timed out after {after} waiting for the target node"
    message = "the attach did not complete before the attach deadline"
    return f"{message}: {last_error}" if last_error else message
