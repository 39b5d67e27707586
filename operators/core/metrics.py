"""Prometheus metrics shared by all operators, and the registry they are served from.

Names follow Prometheus conventions with the project prefix ``dra_operators_``. The work-queue
family mirrors client-go's ``workqueue_*`` metrics (same meaning, same buckets), labelled with
the queue ``name``; each operator adds its domain metrics in its own package.

Gauges that describe current state (queue depth, unfinished work) are computed at scrape time
from the live queues, so they can never drift from the truth.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .workqueue import WorkQueue

PREFIX = "dra_operators_"
# client-go's work-queue histograms: 1e-8 s .. 10 s, x10.
WORKQUEUE_BUCKETS = tuple(10.0**exp for exp in range(-8, 2))

registry: CollectorRegistry = REGISTRY
# The *_created series double the exposition for no use on dashboards.
disable_created_metrics()  # type: ignore[no-untyped-call]


def operator_prefix(operator: str) -> str:
    """What every metric of one operator's own starts with: ``dra_operators_<operator>_``."""
    return f"{PREFIX}{operator}_"


Source = TypeVar("Source")


class ScrapedState(Collector, Generic[Source]):
    """Gauges of current state, computed at scrape time from the controller that observed itself
    last, so they cannot drift from its caches; ``families(None)`` gives the empty families.

    The controller is held weakly: one that stopped (a lost Lease starts a new run in the same
    process; in-process tests run several) drops out without bookkeeping, and its successor
    replaces it. Scrapes run on the operator's event loop, as the watch handlers do, so reading
    the caches needs no lock.
    """

    def __init__(self, families: Callable[[Source | None], Iterable[Metric]]) -> None:
        self._families = families
        self._source: weakref.ref[Source] | None = None
        registry.register(self)

    def observe(self, source: Source) -> None:
        self._source = weakref.ref(source)

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._source() if self._source is not None else None)


_adds = Counter(f"{PREFIX}workqueue_adds", "Total number of adds handled by a work queue.", ["name"])
_retries = Counter(f"{PREFIX}workqueue_retries", "Total number of retries handled by a work queue.", ["name"])
_queue_duration = Histogram(
    f"{PREFIX}workqueue_queue_duration_seconds",
    "How long in seconds an item stays in a work queue before being requested.",
    ["name"],
    buckets=WORKQUEUE_BUCKETS,
)
_work_duration = Histogram(
    f"{PREFIX}workqueue_work_duration_seconds",
    "How long in seconds processing an item from a work queue takes.",
    ["name"],
    buckets=WORKQUEUE_BUCKETS,
)

_watch_events = Counter(
    f"{PREFIX}watch_events",
    "Watch events delivered to the operator's caches, by resource and type (None: kopf's listing).",
    ["resource", "type"],
)

_client_requests = Counter(
    f"{PREFIX}client_requests",
    "API requests sent by the operator, by HTTP method and response code ('error': no response).",
    ["method", "code"],
)


_in_tree_detected = Gauge(
    f"{PREFIX}in_tree_controller_detected",
    "1 once kube-controller-manager's controller that this operator replaces was seen acting on the "
    "same objects (the coexistence guard), else 0.",
    ["controller"],
)
_leader = Gauge(
    f"{PREFIX}leader",
    "1 while this replica acts (it holds the Lease, or leader election is off), 0 while a standby.",
    ["operator"],
)
_writes_refused = Counter(
    f"{PREFIX}client_writes_refused",
    "Writes the operator did not send because the coexistence guard stopped it.",
    ["method"],
)


def in_tree_controller(controller: str, detected: bool) -> None:
    _in_tree_detected.labels(controller).set(1 if detected else 0)


def leading(operator: str, acts: bool) -> None:
    _leader.labels(operator).set(1 if acts else 0)


def write_refused(method: str) -> None:
    _child(_writes_refused, method).inc()


_informer_relists = Counter(
    f"{PREFIX}informer_relists",
    "Full lists of a watched kind after the start, by reason (gone: the watch's resourceVersion expired; "
    "unreadable: the watch sent an event the operator cannot read; unexpected: the watch failed otherwise).",
    ["resource", "reason"],
)
_informer_last_event = Gauge(
    f"{PREFIX}informer_last_event_timestamp_seconds",
    "When the informer of a kind last heard from the server (an event, a bookmark or a list).",
    ["resource"],
)


def informer_event(resource: str) -> None:
    _child(_informer_last_event, resource).set_to_current_time()


def informer_relist(resource: str, reason: str) -> None:
    _child(_informer_relists, resource, reason).inc()


def watch_event(resource: str, type_: str | None) -> None:
    _child(_watch_events, resource, type_ or "None").inc()


def client_request_done(method: str, code: str) -> None:
    _child(_client_requests, method, code).inc()


@functools.cache
def _child(counter: Any, *label_values: str) -> Any:
    # Called for every watch event and every request; the label lookup is cached, as the
    # combinations are few (kinds and event types, methods and status codes).
    return counter.labels(*label_values)


_live_queues: weakref.WeakSet[WorkQueue[Any]] = weakref.WeakSet()


class CachedObjects(Protocol):
    def cached_objects(self) -> Mapping[str, int]:
        """Objects held per resource (plural), read at scrape time."""
        ...


_live_caches: weakref.WeakSet[CachedObjects] = weakref.WeakSet()


def report_cache(cache: CachedObjects) -> None:
    """Serve ``cache``'s sizes as ``dra_operators_cached_objects`` for as long as it lives."""
    _live_caches.add(cache)


class WorkQueueMetrics:
    def __init__(self, name: str) -> None:
        self._adds = _adds.labels(name=name)
        self._retries = _retries.labels(name=name)
        self._queue_duration = _queue_duration.labels(name=name)
        self._work_duration = _work_duration.labels(name=name)

    def bind(self, queue: WorkQueue[Any]) -> None:
        _live_queues.add(queue)

    def added(self) -> None:
        self._adds.inc()

    def retried(self) -> None:
        self._retries.inc()

    def taken(self, waited: float) -> None:
        self._queue_duration.observe(waited)

    def worked(self, took: float) -> None:
        self._work_duration.observe(took)


class _WorkQueueStateCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            f"{PREFIX}workqueue_depth", "Current depth of a work queue.", labels=["name"]
        )
        unfinished = GaugeMetricFamily(
            f"{PREFIX}workqueue_unfinished_work_seconds",
            "Seconds of work in progress that has not been observed by work_duration yet.",
            labels=["name"],
        )
        longest = GaugeMetricFamily(
            f"{PREFIX}workqueue_longest_running_processor_seconds",
            "Seconds the longest running processor of a work queue has been running.",
            labels=["name"],
        )
        for queue in list(_live_queues):
            running = queue.running_times()
            depth.add_metric([queue.name], len(queue))
            unfinished.add_metric([queue.name], sum(running))
            longest.add_metric([queue.name], max(running, default=0.0))
        yield depth
        yield unfinished
        yield longest


registry.register(_WorkQueueStateCollector())


class _CachedObjectsCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{PREFIX}cached_objects",
            "Objects held in the operator's caches, by resource: what its memory grows with.",
            labels=["resource"],
        )
        totals: dict[str, int] = {}
        for cache in list(_live_caches):
            for resource, count in cache.cached_objects().items():
                totals[resource] = totals.get(resource, 0) + count
        for resource, count in sorted(totals.items()):
            family.add_metric([resource], count)
        yield family


registry.register(_CachedObjectsCollector())


def exposition() -> bytes:
    return generate_latest(registry)
