"""Prometheus metrics of the pool-status operator (spec section 15).

Labels carry only the API group (``resource.k8s.io`` or ``dra-operators.io``) and small
fixed enums, never driver, pool or request names, so cardinality stays bounded whatever
users create. The names echo upstream's ``resourcepoolstatusrequest_controller_*``.

Gauges that describe current state (pending requests, synced caches) are computed at
scrape time from the live controller, so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix

P = operator_prefix("poolstatus")

requests_processed = Counter(
    f"{P}requests_processed", "Statuses written by this operator.", ["group", "result"]
)
processing_errors = Counter(
    f"{P}request_processing_errors",
    "Evaluations that ended in a retry, by stage (cache, compute, write).",
    ["group", "stage"],
)
processing_duration = Histogram(
    f"{P}request_processing_duration_seconds",
    "Seconds of one evaluation: the consistent view plus the computation.",
    ["group"],
    buckets=tuple(0.001 * 2**k for k in range(16)),
)
completion_latency = Histogram(
    f"{P}request_completion_latency_seconds",
    "Seconds from a request's creationTimestamp to its successful status write.",
    ["group", "result"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120, 300),
)
pools_counted = Histogram(
    f"{P}pools_counted",
    "poolCount of each Complete status written.",
    ["group"],
    buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000),
)
pool_validation_errors = Counter(
    f"{P}pool_validation_errors",
    "Listed pools written with a validationError, by its prefix.",
    ["group", "prefix"],
)
grace_requeues = Counter(
    f"{P}grace_requeues", "Evaluations deferred because a listed pool was incomplete.", ["group"]
)
status_write_conflicts = Counter(
    f"{P}status_write_conflicts",
    "409 or 422 answers to a status write caused by a concurrent writer.",
    ["group", "outcome"],
)
status_rejected = Counter(
    f"{P}status_rejected",
    "Statuses the API server refused, replaced by the fallback Failed status.",
    ["group", "reason"],
)
status_fields_dropped = Counter(
    f"{P}status_fields_dropped",
    "Written status fields the API server did not keep (its API version lacks them, or the CRD "
    "prunes them), by field path below status.",
    ["group", "field"],
)
ttl_deletions = Counter(
    f"{P}ttl_deletions", "Requests deleted by the TTL sweep, by the TTL that applied.", ["group", "state"]
)
ttl_deletion_errors = Counter(
    f"{P}ttl_deletion_errors", "TTL deletions that failed other than with 404 or 409.", ["group"]
)
cleanup_duration = Histogram(f"{P}cleanup_duration_seconds", "Seconds of one TTL sweep.")
api_surface_enabled = Gauge(f"{P}api_surface_enabled", "1 when the API surface is served.", ["group"])


class StateSource(Protocol):
    def pending_counts(self) -> Mapping[str, int]: ...
    def cache_synced(self) -> Mapping[str, bool]: ...


def _families(source: StateSource | None) -> Iterator[GaugeMetricFamily]:
    pending = GaugeMetricFamily(
        f"{P}pending_requests", "Requests without status known to the operator.", labels=["group"]
    )
    synced = GaugeMetricFamily(
        f"{P}cache_synced", "1 once the cache has synced, 0 while pending or failed.", labels=["resource"]
    )
    if source is not None:
        for group, count in source.pending_counts().items():
            pending.add_metric([group], count)
        for resource, ok in source.cache_synced().items():
            synced.add_metric([resource], 1.0 if ok else 0.0)
    yield pending
    yield synced


state = ScrapedState(_families)
