"""The devicetaint operator's own Prometheus metrics (spec §12).

They mirror upstream's ``device_taint_eviction_controller_*`` metrics with the project prefix: same meaning,
same histogram buckets. Both count only deletions this process performed or found already under way
(spec §9, step 7), so they restart from zero with the process, like the rules' evicted counts.

``paced_pods`` is the project's own (eviction pacing, :mod:`.pacing`): a gauge computed at scrape time
from the controller, so it cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix

P = operator_prefix("devicetaint")
# Upstream's buckets: from a prompt eviction (5 ms) to a slow one (4 min).
DELETION_DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240)

pod_deletions = Counter(
    f"{P}pod_deletions",
    "Pods deleted by the devicetaint operator since it started.",
)
pod_deletion_duration = Histogram(
    f"{P}pod_deletion_duration_seconds",
    "Seconds from the time a pod had to be evicted (taint timeAdded plus toleration) to its deletion.",
    buckets=DELETION_DURATION_BUCKETS,
)


class StateSource(Protocol):
    def paced_pod_count(self) -> int: ...


def _families(source: StateSource | None) -> Iterator[GaugeMetricFamily]:
    yield GaugeMetricFamily(
        f"{P}paced_pods",
        "Pods due for eviction that wait for a token of their DeviceTaintRule's "
        "dra-operators.io/evictions-per-minute.",
        value=source.paced_pod_count() if source is not None else 0,
    )


state = ScrapedState(_families)
