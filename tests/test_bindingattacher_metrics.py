"""Scrape-time gauges of the binding attacher come from the live controller's caches."""

from __future__ import annotations

from collections.abc import Iterable

from operators.bindingattacher import metrics
from operators.core.metrics import exposition


class Snapshot:
    def record_phases(self) -> Iterable[tuple[str, str, int]]:
        return [("drv.example.com", "Attached", 2)]

    def inflight(self) -> Iterable[tuple[str, str, int]]:
        return [("drv.example.com", "attach", 1)]

    def policy_readiness(self) -> Iterable[tuple[str, str, bool]]:
        return [("fabric", "drv.example.com", True)]

    def test_action_calls(self) -> Iterable[tuple[str, str, int]]:
        return [("attach", "Succeeded", 3)]


def test_gauges_are_read_from_the_bound_snapshot() -> None:
    snapshot = Snapshot()
    metrics.state.observe(snapshot)
    text = exposition().decode()
    p = metrics.P
    assert f'{p}records{{driver="drv.example.com",phase="Attached"}} 2.0' in text
    assert f'{p}inflight_calls{{driver="drv.example.com",operation="attach"}} 1.0' in text
    assert f'{p}policy_ready{{driver="drv.example.com",policy="fabric"}} 1.0' in text
    assert f'{p}test_action_calls_total{{operation="attach",outcome="Succeeded"}} 3.0' in text
    del snapshot
    assert f"{p}records{{" not in exposition().decode(), "a dropped controller is not kept alive"
