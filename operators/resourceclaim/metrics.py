"""The resourceclaim operator's Prometheus metrics (spec section 10).

``dra_operators_resourceclaim_creates_total`` counts create requests as they are sent.
``dra_operators_resourceclaim_resource_claims`` is computed at scrape time from the live
claim cache, so it can never drift from what the watch delivered; label sets without any
claim are not emitted, as upstream's collector does.

It reads the cache the controller gives :data:`state` (``state.observe(cache)``); scrapes run
on the operator's event loop, the same thread as the watch handlers, which is what the cache's
concurrency contract asks for.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix

from .cache import ClusterCache
from .metric_labels import claim_gauge_counts

P = operator_prefix("resourceclaim")

creates = Counter(
    f"{P}creates",
    "Number of ResourceClaims creation requests, by outcome, by whether admin access was requested, "
    "and by the API group and kind of the claim's owner (a Pod or a PodGroup).",
    ["status", "admin_access", "owner_api_group", "owner_api_kind"],
)

workload_claims = Gauge(
    f"{P}workload_claims_enabled",
    "1 when the operator handles the ResourceClaims of PodGroups (--workload-claims and discovery).",
)


def count_create(status: str, admin_access: str, owner_api_group: str, owner_api_kind: str) -> None:
    creates.labels(
        status=status,
        admin_access=admin_access,
        owner_api_group=owner_api_group,
        owner_api_kind=owner_api_kind,
    ).inc()


def _families(cache: ClusterCache | None) -> Iterator[GaugeMetricFamily]:
    family = GaugeMetricFamily(
        f"{P}resource_claims",
        "Number of ResourceClaims, by allocation state, admin access and source.",
        labels=["allocated", "admin_access", "source"],
    )
    if cache is not None:
        for labels, count in sorted(claim_gauge_counts(cache.claims()).items()):
            family.add_metric(list(labels), count)
    yield family


state = ScrapedState(_families)
