"""The resourceclaim operator's Prometheus metrics (spec section 10).

``dra_operators_resourceclaim_creates_total`` counts create requests as they are sent.
``dra_operators_resourceclaim_resource_claims`` is computed at scrape time from the live
claim cache, so it can never drift from what the watch delivered; label sets without any
claim are not emitted, as upstream's collector does.

The collector is registered once, at import. It reads the cache through a weak reference
set by :func:`bind`, so a stopped controller (in-process tests run several) is not kept
alive by the registry. Scrapes run on the operator's event loop, the same thread as the
watch handlers, which is what the cache's concurrency contract asks for.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from operators.core.metrics import PREFIX, registry

from .cache import ClusterCache
from .metric_labels import claim_gauge_counts

METRIC_PREFIX = f"{PREFIX}resourceclaim_"

creates = Counter(
    f"{METRIC_PREFIX}creates",
    "Number of ResourceClaims creation requests, by outcome, by whether admin access was requested, "
    "and by the API group and kind of the claim's owner (a Pod or a PodGroup).",
    ["status", "admin_access", "owner_api_group", "owner_api_kind"],
    registry=registry,
)

workload_claims = Gauge(
    f"{METRIC_PREFIX}workload_claims_enabled",
    "1 when the operator handles the ResourceClaims of PodGroups (--workload-claims and discovery).",
    registry=registry,
)

_bound: weakref.ref[ClusterCache] | None = None


def bind(cache: ClusterCache) -> None:
    """Make ``cache`` the source of the scrape-time gauge."""
    global _bound
    _bound = weakref.ref(cache)


def count_create(status: str, admin_access: str, owner_api_group: str, owner_api_kind: str) -> None:
    creates.labels(
        status=status,
        admin_access=admin_access,
        owner_api_group=owner_api_group,
        owner_api_kind=owner_api_kind,
    ).inc()


class _ClaimsCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{METRIC_PREFIX}resource_claims",
            "Number of ResourceClaims, by allocation state, admin access and source.",
            labels=["allocated", "admin_access", "source"],
        )
        cache = _bound() if _bound is not None else None
        if cache is not None:
            for labels, count in sorted(claim_gauge_counts(cache.claims()).items()):
                family.add_metric(list(labels), count)
        yield family


registry.register(_ClaimsCollector())
