"""The taint-selector operator's Prometheus metrics (prefix ``dra_operators_taintselector_``).

``selected_devices`` is computed at scrape time from the live controller's cache of last outcomes,
so a deleted selector disappears from it without any bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix
from operators.dra.scopes import rule_writes_counter

P = operator_prefix("taintselector")

evaluations = Counter(
    f"{P}evaluations",
    "Selector evaluations, by result (valid or invalid).",
    ["result"],
)
evaluation_duration = Histogram(
    f"{P}evaluation_duration_seconds",
    "Seconds spent evaluating one selector against every published device.",
    buckets=(0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
rule_writes = rule_writes_counter(P)


class _Source(Protocol):
    @property
    def selected(self) -> Mapping[str, int]: ...


def _families(source: _Source | None) -> Iterator[GaugeMetricFamily]:
    family = GaugeMetricFamily(
        f"{P}selected_devices",
        "Devices selected by each valid selector, each tainted by one DeviceTaintRule.",
        labels=["selector"],
    )
    for name, count in sorted(source.selected.items() if source is not None else ()):
        family.add_metric([name], count)
    yield family


state = ScrapedState(_families)
"""``state.observe(controller)``: scrape its ``selected`` (selector name -> selected devices)."""
