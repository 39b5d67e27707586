"""Eviction pacing, a project extension beyond upstream (docs/device-health.md, Behaviour, 6).

A DeviceTaintRule annotated ``dra-operators.io/evictions-per-minute: "<n>"`` evicts the pods its
``NoExecute`` taint hits at most ``n`` per minute: a token bucket refills at that rate. Its burst is
1, so a rule never evicts two pods at once; pacing exists to spread the loss of a failed device's
workloads, and a larger burst would evict that many together the moment the taint lands.

The bucket is the rule's own, unless a project object (API group ``dra-operators.io``, the device
health policy) controls the rule: then all the rules of that owner share one, and the limit is the
owner's, whatever number of devices it taints.

A pod is paced only while every taint that makes it due now comes from a paced rule. A ResourceSlice
taint, or a rule without (or with a malformed) annotation, evicts it at once, as upstream would.
When several paced rules make it due, one token of any of them lets it go: each rule's own limit
still holds. A pod that waits stays scheduled and so counts as pending in the rule's
``EvictionInProgress`` condition: the condition reads upstream's messages, unchanged.

Buckets live in memory only. After a restart each starts full, so a restart can let one more pod
per bucket go early (the burst), never more. A bucket that has refilled to full acts exactly as a
new one, so it is dropped: memory stays bounded by the paced rules that are evicting right now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from operators.core import PROJECT_GROUP
from operators.core.ratelimit import TokenBucket
from operators.core.texts import ELLIPSIS, truncate_chars
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

from .models import DeviceTaintRule

BURST = 1
REASON_INVALID_PACING = "InvalidEvictionPacing"

MAX_PER_MINUTE = 2**63 - 1
"""The largest integer a Kubernetes object holds (the policy's ``evictionsPerMinute`` is an int64).
A larger value is malformed, not "unlimited": it fits no float rate, and past 4300 digits Python
refuses to read it at all."""

_DIGITS = re.compile(r"[0-9]+")
_SHOWN_CHARS = 40


@dataclass(frozen=True)
class Pace:
    """A paced rule's limit: ``scope`` names the bucket it shares (its owner's, or its own)."""

    scope: str
    per_minute: int


def parse_per_minute(value: str | None) -> int | None:
    """The annotation's positive integer, or None when absent or malformed (:func:`malformed`)."""
    if value is None or not _DIGITS.fullmatch(value):
        return None
    significant = value.lstrip("0")
    if len(significant) > len(str(MAX_PER_MINUTE)):
        return None
    number = int(significant or "0")
    return number if 0 < number <= MAX_PER_MINUTE else None


def malformed(value: str | None) -> bool:
    """Whether the annotation is set to something other than a positive integer up to
    :data:`MAX_PER_MINUTE`."""
    return value is not None and parse_per_minute(value) is None


def malformed_text(value: str) -> str:
    return (
        f"annotation {EVICTIONS_PER_MINUTE}: {truncate_chars(value, _SHOWN_CHARS, ELLIPSIS)!r} "
        f"is not a positive integer of at most {MAX_PER_MINUTE}; "
        "the evictions of this rule are not paced"
    )


def scope_of(rule: DeviceTaintRule) -> str:
    """The bucket of a rule: its controlling owner's when that is a project object, else its own."""
    controller = rule.metadata.controller
    if controller is not None and controller.group == PROJECT_GROUP:
        return f"owner {controller.uid}"
    return f"rule {rule.metadata.uid}"


def pace_of(rule: DeviceTaintRule) -> Pace | None:
    per_minute = parse_per_minute(rule.evictions_per_minute)
    return None if per_minute is None else Pace(scope_of(rule), per_minute)


class Pacer:
    """The token buckets of the paced rules; time is passed in (a monotonic clock's seconds)."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}

    def admit(self, paces: Iterable[Pace | None], now: float) -> float:
        """0.0 when the pod may go now (one token taken, unless an unpaced taint makes it due),
        else the seconds until a token of one of its paced rules is there.

        ``paces``: one entry per taint that makes the pod due now, None for an unpaced one. None at
        all (the cache found none due) lets the pod go: pacing must never stall an eviction.
        """
        wanted = list(paces)
        if not wanted or any(pace is None for pace in wanted):
            return 0.0
        self._drop_full(now)
        waits: list[float] = []
        for pace in sorted({p for p in wanted if p is not None}, key=lambda p: (p.scope, p.per_minute)):
            wait = self._bucket(pace, now).try_take(now)
            if wait == 0.0:
                return 0.0
            waits.append(wait)
        return min(waits)

    def bucket_count(self) -> int:
        return len(self._buckets)

    def _bucket(self, pace: Pace, now: float) -> TokenBucket:
        qps = pace.per_minute / 60.0
        bucket = self._buckets.get(pace.scope)
        if bucket is None:
            bucket = self._buckets[pace.scope] = TokenBucket(qps, BURST, now)
        elif bucket.qps != qps:
            bucket.set_qps(qps, now)
        return bucket

    def _drop_full(self, now: float) -> None:
        for scope in [scope for scope, bucket in self._buckets.items() if bucket.full(now)]:
            del self._buckets[scope]
