"""From a request and one consistent snapshot of the caches to the status to write.

This is the pure heart of the operator (spec sections 7.2 to 7.9). Together,
:func:`compute_pools` (one :func:`pool_result` per pool) and :func:`decide` answer one
question: given the request spec, the slices, claims and taint rules, and the clock, should
the operator write now, and if so exactly what? :func:`decide` either defers (a listed pool
is still incomplete and the grace period has not run out) or returns the final status
document, already checked against the size guard. The operator calls :func:`decide` on the
pool results its cache keeps (``cache.py``).

The caller owns everything impure: the caches, the ``first_seen`` bookkeeping (process
memory, so a restart starts the grace period again), timers, the write itself and the
metrics, for which :class:`Completed` carries the numbers.

Output is deterministic (decision D8): the same snapshot in any order produces the same
document, byte for byte, apart from ``lastTransitionTime``. Keys are emitted in the API's
field order so that the written JSON reads like the built-in type's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from operators.core.conditions import TRUE, Condition, format_time

from . import messages
from .counts import (
    DeviceAvailability,
    Held,
    PoolUsage,
    count_availability,
    device_availability,
    index_results,
    pool_usage,
    rules_for_driver,
)
from .models import DeviceTaintRule, RequestSpec, ResourceClaim, ResourceSlice
from .partitions import partition_view
from .pools import Pool, group_pools
from .shareable import shareable_view

CONDITION_COMPLETE = "Complete"
CONDITION_FAILED = "Failed"
REASON_COMPLETE = "CalculationComplete"
REASON_FAILED = "CalculationFailed"

DEFAULT_GRACE_SECONDS = 20.0
DEFAULT_MAX_STATUS_BYTES = 1_048_576
# Re-evaluation delays while waiting for an incomplete pool: 0.5 s doubling up to 8 s.
_FIRST_RETRY_SECONDS = 0.5
_MAX_RETRY_SECONDS = 8.0

Status = dict[str, Any]


@dataclass(frozen=True)
class PoolResult:
    complete: bool
    status: dict[str, Any]
    """One ``status.pools[]`` entry."""

    @property
    def validation_error(self) -> str | None:
        error = self.status.get("validationError")
        return error if isinstance(error, str) else None


@dataclass(frozen=True)
class Deferred:
    """Do not write yet; evaluate again after ``retry_after`` seconds (or on a slice event)."""

    retry_after: float
    incomplete_listed: int


@dataclass(frozen=True)
class Completed:
    """Write ``status`` now. The other fields feed logs and metrics."""

    status: Status
    result: Literal["complete", "failed"]
    pool_count: int
    listed: int
    incomplete: int
    """Listed pools carrying a validationError, whatever its prefix."""
    validation_prefixes: tuple[str, ...]
    """The prefix of each listed pool's validationError, in list order."""
    too_large: bool = False
    """The computed status exceeded the size limit and was replaced by a Failed status."""


Evaluation = Deferred | Completed


# One pool -------------------------------------------------------------------------------


def _incomplete_pool_status(pool: Pool) -> dict[str, Any]:
    status: dict[str, Any] = {"driver": pool.driver, "poolName": pool.name, "generation": pool.generation}
    if pool.node_name is not None:
        status["nodeName"] = pool.node_name
    status["validationError"] = messages.pool_incomplete(
        pool.driver, pool.name, pool.slice_count, pool.expected_slice_count, pool.generation
    )
    return status


def _complete_pool_status(
    pool: Pool, usage: PoolUsage, availability: Sequence[DeviceAvailability], default_attribute: str | None
) -> dict[str, Any]:
    counts = count_availability(availability)
    status: dict[str, Any] = {
        "driver": pool.driver,
        "poolName": pool.name,
        "generation": pool.generation,
        "resourceSliceCount": pool.slice_count,
        "totalDevices": counts.total,
        "allocatedDevices": counts.allocated,
        "availableDevices": counts.available,
        "unavailableDevices": counts.unavailable,
    }
    if pool.node_name is not None:
        status["nodeName"] = pool.node_name
    partitions = partition_view(pool, availability, default_attribute)
    shareable = shareable_view(pool, usage)
    # As upstream: the partition error wins, a partition summary needs both views clean,
    # and the shareable summary only needs its own view clean.
    error = partitions.error or shareable.error
    if error is not None:
        status["validationError"] = error
    elif partitions.summary:
        status["partitionSummary"] = [entry.to_dict() for entry in partitions.summary]
    if shareable.summary is not None:
        status["shareableSummary"] = shareable.summary.to_dict()
    return status


def pool_result(
    pool: Pool,
    pool_results: Sequence[Held],
    driver_rules: Sequence[DeviceTaintRule],
    default_attribute: str | None,
) -> PoolResult:
    """One pool's entry; ``pool_results`` are the pool's held devices in claim order.

    A function of its arguments only, so the cache can keep it until one of them changes.
    """
    if not pool.complete:
        return PoolResult(complete=False, status=_incomplete_pool_status(pool))
    usage = pool_usage(pool, pool_results)
    availability = device_availability(pool, usage.in_use, driver_rules)
    return PoolResult(
        complete=True, status=_complete_pool_status(pool, usage, availability, default_attribute)
    )


def compute_pools(
    spec: RequestSpec,
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim],
    rules: Iterable[DeviceTaintRule] = (),
) -> list[PoolResult]:
    """Every pool matching the request, sorted by (driver, pool name), before ``limit``.

    ``rules`` is empty when DeviceTaintRules are not in use.
    """
    pools = group_pools(slices, spec.driver, spec.pool_name)
    if not pools:
        return []
    results_by_pool = index_results(claims)
    driver_rules = rules_for_driver(rules, spec.driver)
    return [
        pool_result(
            pool,
            results_by_pool.get((pool.driver, pool.name), ()),
            driver_rules,
            spec.default_partition_type_attribute,
        )
        for pool in pools
    ]


# Whole status ---------------------------------------------------------------------------


def _condition(type_: str, reason: str, message: str, written_at: datetime) -> dict[str, Any]:
    return Condition(
        type=type_, status=TRUE, reason=reason, message=message, last_transition_time=format_time(written_at)
    ).to_dict()


def complete_status(pools: Sequence[PoolResult], limit: int, written_at: datetime) -> Status:
    listed = pools[:limit]
    incomplete = sum(1 for p in listed if p.validation_error is not None)
    status: Status = {"poolCount": len(pools)}
    if listed:
        status["pools"] = [p.status for p in listed]
    message = messages.complete_message(len(listed), incomplete)
    status["conditions"] = [_condition(CONDITION_COMPLETE, REASON_COMPLETE, message, written_at)]
    return status


def failed_status(message: str, written_at: datetime) -> Status:
    """A Failed status; ``message`` is one of the ``Failed to ...`` texts of messages.py."""
    condition = _condition(CONDITION_FAILED, REASON_FAILED, messages.condition_message(message), written_at)
    return {"poolCount": 0, "conditions": [condition]}


def encoded_size(status: Status) -> int:
    """Bytes of the compact JSON encoding, which is what the size guard limits."""
    return len(json.dumps(status, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


# Grace period ---------------------------------------------------------------------------


def grace_retry_delay(elapsed: float, grace: float) -> float | None:
    """Seconds until the next re-evaluation of a request waiting for incomplete pools.

    ``elapsed`` is the time since the request's first evaluation in this process. The
    checks fall at 0.5, 1.5, 3.5, 7.5, 15.5, 23.5 ... s (delays 0.5 s doubling to 8 s) and
    once exactly at the deadline; None means the deadline has passed: write now.
    """
    if elapsed >= grace:
        return None
    checkpoint, delay = 0.0, _FIRST_RETRY_SECONDS
    while checkpoint <= elapsed:
        checkpoint += delay
        delay = min(delay * 2, _MAX_RETRY_SECONDS)
    return min(checkpoint, grace) - elapsed


# Entry point ----------------------------------------------------------------------------


def decide(
    spec: RequestSpec,
    pools: Sequence[PoolResult],
    *,
    now: float,
    first_seen: float,
    written_at: datetime,
    grace: float = DEFAULT_GRACE_SECONDS,
    max_status_bytes: int = DEFAULT_MAX_STATUS_BYTES,
) -> Evaluation:
    """Write now or defer, from pools already computed (by :func:`compute_pools` or the cache)."""
    limit = spec.effective_limit
    listed = pools[:limit]
    blocking = sum(1 for p in listed if not p.complete)
    if blocking:
        delay = grace_retry_delay(now - first_seen, grace)
        if delay is not None:
            return Deferred(retry_after=delay, incomplete_listed=blocking)

    status = complete_status(pools, limit, written_at)
    size = encoded_size(status)
    if size > max_status_bytes:
        message = messages.status_too_large_message(size, max_status_bytes)
        return Completed(
            failed_status(message, written_at),
            result="failed",
            pool_count=0,
            listed=0,
            incomplete=0,
            validation_prefixes=(),
            too_large=True,
        )
    prefixes = tuple(messages.prefix_of(e) for p in listed if (e := p.validation_error) is not None)
    return Completed(
        status,
        result="complete",
        pool_count=len(pools),
        listed=len(listed),
        incomplete=len(prefixes),
        validation_prefixes=prefixes,
    )
