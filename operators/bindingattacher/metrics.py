"""Prometheus metrics of the binding attacher (spec §18), prefix ``dra_operators_bindingattacher_``.

Labels never name claims, pods or devices. Counters and histograms are updated where things
happen; gauges of current state (records per phase, calls in flight, policy readiness, Test
action counters) are computed at scrape time from the controller given to :data:`state`
(``state.observe(controller)``).

The work-queue family comes from the core (``dra_operators_workqueue_*{name="bindingattacher"}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from operators.core.metrics import ScrapedState, operator_prefix

P = operator_prefix("bindingattacher")
# The scheduler's binding-condition wait histogram: 0.1 s x 2^n, 14 buckets (spec §18), so
# the two can be compared directly.
READY_BUCKETS = tuple(0.1 * 2**n for n in range(14))
CALL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

attachments = Counter(
    f"{P}attachments",
    "Final outcome per attachment identity.",
    ["driver", "outcome"],
)
repeated_failures = Counter(
    f"{P}repeated_failures",
    "Times a claim was reported failing several allocation rounds in a row on the same device.",
    ["driver"],
)
events_dropped = Counter(
    f"{P}events_dropped",
    "Events not posted because too many were waiting (Events are diagnostics, spec §15.1).",
)
time_to_ready = Histogram(
    f"{P}time_to_ready_seconds",
    "Seconds from allocationTimestamp to the acknowledged readiness apply.",
    ["driver"],
    buckets=READY_BUCKETS,
)
attach_duration = Histogram(
    f"{P}attach_duration_seconds",
    "Seconds from the creation of a ledger record to its final attach outcome.",
    ["driver", "outcome"],
    buckets=READY_BUCKETS,
)
action_calls = Counter(
    f"{P}action_calls",
    "Attach action calls by operation and result.",
    ["driver", "action_kind", "operation", "result"],
)
action_call_duration = Histogram(
    f"{P}action_call_duration_seconds",
    "Seconds an attach action call took.",
    ["driver", "action_kind", "operation"],
    buckets=CALL_BUCKETS,
)
detaches = Counter(
    f"{P}detaches",
    "Finished detaches by reason and outcome (succeeded, or forgotten without a call).",
    ["driver", "reason", "outcome"],
)
claim_status_writes = Counter(
    f"{P}claim_status_writes",
    "Server-side applies of a claim's status.devices entries, by kind and result.",
    ["driver", "kind", "result"],
)
claim_status_write_duration = Histogram(
    f"{P}claim_status_write_duration_seconds",
    "Seconds a claim status apply took.",
    ["driver"],
    buckets=WRITE_BUCKETS,
)
budget_exhausted = Counter(
    f"{P}budget_exhausted",
    "Attach deadlines reached, by what the record was waiting for.",
    ["driver", "waiting_for"],
)
abandoned = Counter(
    f"{P}abandoned",
    "Allocations removed before their attach deadline without a failure being shown (spec §12.3).",
    ["driver"],
)


class Snapshot(Protocol):
    """What the scrape-time collector reads from the live controller."""

    def record_phases(self) -> Iterable[tuple[str, str, int]]:
        """``(driver, phase, count)``."""

    def inflight(self) -> Iterable[tuple[str, str, int]]:
        """``(driver, operation, count)``."""

    def policy_readiness(self) -> Iterable[tuple[str, str, bool]]:
        """``(policy, driver, ready)``."""

    def test_action_calls(self) -> Iterable[tuple[str, str, int]]:
        """``(operation, outcome, count)`` summed over every Test action instance."""


def _families(source: Snapshot | None) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    records = GaugeMetricFamily(f"{P}records", "Ledger records by phase.", labels=["driver", "phase"])
    inflight = GaugeMetricFamily(
        f"{P}inflight_calls", "Action calls in flight.", labels=["driver", "operation"]
    )
    ready = GaugeMetricFamily(
        f"{P}policy_ready", "1 when a DeviceAttachPolicy is Ready.", labels=["policy", "driver"]
    )
    test_calls = CounterMetricFamily(
        f"{P}test_action_calls",
        "Calls answered by the built-in Test action, by operation and outcome.",
        labels=["operation", "outcome"],
    )
    if source is not None:
        for driver, phase, count in sorted(source.record_phases()):
            records.add_metric([driver, phase], count)
        for driver, operation, count in sorted(source.inflight()):
            inflight.add_metric([driver, operation], count)
        for policy, driver, is_ready in sorted(source.policy_readiness()):
            ready.add_metric([policy, driver], 1.0 if is_ready else 0.0)
        for operation, outcome, count in sorted(source.test_action_calls()):
            test_calls.add_metric([operation, outcome], count)
    yield records
    yield inflight
    yield ready
    yield test_calls


state = ScrapedState(_families)
