"""The taint-selector operator's Prometheus metrics (prefix ``dra_operators_taintselector_``).

``selected_devices`` is computed at scrape time from the live controller's cache of last outcomes,
so a deleted selector disappears from it without any bookkeeping.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from operators.core.metrics import PREFIX

NAMESPACE = f"{PREFIX}taintselector_"

evaluations = Counter(
    f"{NAMESPACE}evaluations",
    "Selector evaluations, by result (valid or invalid).",
    ["result"],
)
evaluation_duration = Histogram(
    f"{NAMESPACE}evaluation_duration_seconds",
    "Seconds spent evaluating one selector against every published device.",
    buckets=(0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
rule_writes = Counter(
    f"{NAMESPACE}rule_writes",
    "DeviceTaintRule writes, by operation (create, update, delete).",
    ["operation"],
)


class _Source(Protocol):
    @property
    def selected(self) -> Mapping[str, int]: ...


_source: weakref.ReferenceType[_Source] | None = None


def observe(source: _Source) -> None:
    """Scrape ``source.selected`` (selector name -> selected devices) from now on."""
    global _source
    _source = weakref.ref(source)


class _SelectedDevices(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}selected_devices",
            "Devices selected by each valid selector, each tainted by one DeviceTaintRule.",
            labels=["selector"],
        )
        source = _source() if _source is not None else None
        for name, count in sorted(source.selected.items() if source is not None else ()):
            family.add_metric([name], count)
        yield family


REGISTRY.register(_SelectedDevices())
