"""The device-health operator's Prometheus metrics (prefix ``dra_operators_devicehealth_``).

The per-policy gauges (signalled, tainted and held-back devices) are computed at scrape time from
the controller's last counts, so a deleted policy disappears from them without bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix
from operators.dra.scopes import rule_writes_counter

from .status import Counts

P = operator_prefix("devicehealth")

rule_writes = rule_writes_counter(P)
signal_to_taint = Histogram(
    f"{P}signal_to_taint_seconds",
    "Seconds from the start of a device's signal to the creation of its DeviceTaintRule.",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)


class _Source(Protocol):
    @property
    def counts(self) -> Mapping[str, Counts]: ...


_GAUGES = (
    ("signalled_devices", "Devices in each policy's scope whose signal holds.", "signalled"),
    ("tainted_devices", "Devices each policy has tainted (or would taint, in a dry run).", "tainted"),
    ("held_back_devices", "Signalled devices each policy holds back under maxUnavailable.", "held_back"),
)


def _families(source: _Source | None) -> Iterator[GaugeMetricFamily]:
    counts = sorted(source.counts.items()) if source is not None else []
    for name, documentation, attribute in _GAUGES:
        family = GaugeMetricFamily(f"{P}{name}", documentation, labels=["policy"])
        for policy, values in counts:
            family.add_metric([policy], getattr(values, attribute))
        yield family


state = ScrapedState(_families)
"""``state.observe(controller)``: scrape its ``counts`` (policy name -> :class:`~.status.Counts`)."""
