from __future__ import annotations

import pytest

from operators.bindingattacher.decide import FailureStreaks
from operators.bindingattacher.identity import DeviceKey
from operators.dra.pools import DeviceId

pytestmark = pytest.mark.unit

D0 = DeviceKey(DeviceId("fabric.example.com", "pool", "d0"))
D1 = DeviceKey(DeviceId("fabric.example.com", "pool", "d1"))


def test_a_streak_is_reported_every_third_round() -> None:
    streaks = FailureStreaks()
    reports = [streaks.failed("claim", D0) for _ in range(7)]
    assert reports == [None, None, 3, None, None, 6, None]


def test_success_or_another_device_starts_again() -> None:
    streaks = FailureStreaks(report_every=2)
    assert streaks.failed("claim", D0) is None
    assert streaks.failed("claim", D1) is None
    streaks.succeeded("claim", D0)
    assert streaks.failed("claim", D0) is None
    assert streaks.failed("claim", D1) == 2
    assert streaks.failed("other", D1) is None


def test_memory_is_bounded_and_forgets_the_oldest() -> None:
    streaks = FailureStreaks(report_every=2, limit=2)
    streaks.failed("a", D0)
    streaks.failed("b", D0)
    streaks.failed("a", D0)  # 2: reported, and now the most recent
    streaks.failed("c", D0)
    assert len(streaks) == 2
    assert streaks.failed("b", D0) is None  # b was forgotten
