"""Action calls in flight: parked outcomes, cancellation, stale tickets and slot limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from bindingattacher_builders import spawn

from operators.bindingattacher.actions import AttachResult, CallOutcome, Operation, Outcome
from operators.bindingattacher.calls import CallTracker


def _outcome(message: str = "") -> CallOutcome:
    return CallOutcome(AttachResult(Outcome.SUCCEEDED, message))


async def _in_flight_until_closed() -> CallOutcome:
    """A call that never ends of itself: it holds its slot until the tracker closes."""
    await asyncio.Event().wait()
    return _outcome()


def _attaching_da_1(
    call: Callable[[], Coroutine[Any, Any, CallOutcome]],
) -> tuple[CallTracker, asyncio.Event]:
    """A tracker running ``call`` as da-1's attach, and the event its end sets."""
    tracker = CallTracker(max_total=10, spawn=spawn)
    done = asyncio.Event()
    tracker.start("da-1", Operation.ATTACH, "fabric", "drv", call, done.set)
    return tracker, done


async def test_an_outcome_is_parked_until_consumed() -> None:
    async def call() -> CallOutcome:
        return _outcome("ok")

    tracker, done = _attaching_da_1(call)
    assert tracker.in_flight("da-1")
    await asyncio.wait_for(done.wait(), 1)
    assert not tracker.in_flight("da-1")
    parked = tracker.outcome("da-1")
    assert parked is not None
    assert parked[0] is Operation.ATTACH
    assert parked[1].result.message == "ok"
    tracker.consume("da-1")
    assert tracker.outcome("da-1") is None


async def test_a_cancelled_or_superseded_call_never_reports() -> None:
    tracker = CallTracker(max_total=10, spawn=spawn)
    release = asyncio.Event()
    reported: list[str] = []

    async def slow() -> CallOutcome:
        await release.wait()
        return _outcome("late")

    tracker.start("da-1", Operation.ATTACH, "fabric", "drv", slow, lambda: reported.append("attach"))
    tracker.cancel("da-1")
    tracker.start("da-2", Operation.ATTACH, "fabric", "drv", slow, lambda: reported.append("first"))

    async def fast() -> CallOutcome:
        return _outcome("second")

    tracker.start("da-2", Operation.DETACH, "fabric", "drv", fast, lambda: reported.append("second"))
    release.set()
    await asyncio.sleep(0.05)
    assert reported == ["second"]
    parked = tracker.outcome("da-2")
    assert parked is not None
    assert parked[1].result.message == "second"
    assert tracker.outcome("da-1") is None


async def test_a_crashing_call_becomes_a_transient_error() -> None:
    async def broken() -> CallOutcome:
        raise RuntimeError("boom")

    tracker, done = _attaching_da_1(broken)
    await asyncio.wait_for(done.wait(), 1)
    parked = tracker.outcome("da-1")
    assert parked is not None
    assert parked[1].result.outcome is Outcome.TRANSIENT_ERROR
    assert "boom" in parked[1].result.message


async def test_slots_count_attaches_per_policy_and_all_calls_overall() -> None:
    tracker = CallTracker(max_total=3, spawn=spawn)
    tracker.start("a1", Operation.ATTACH, "fabric", "drv", _in_flight_until_closed, lambda: None)
    tracker.start("d1", Operation.DETACH, "fabric", "drv", _in_flight_until_closed, lambda: None)
    assert not tracker.slot_free("fabric", max_attaches=1)
    assert tracker.slot_free("fabric", max_attaches=2), "detaches have their own limit"
    tracker.start("a2", Operation.PROBE, "nic", "drv2", _in_flight_until_closed, lambda: None)
    assert not tracker.slot_free("other", max_attaches=5), "the process-wide cap is reached"
    assert tracker.counts() == {("drv", "attach"): 1, ("drv", "detach"): 1, ("drv2", "probe"): 1}
    await tracker.close()
    assert tracker.counts() == {}


async def test_one_policy_cannot_take_every_slot() -> None:
    """Issue #38: --max-actions-per-policy leaves the other policies their share."""
    tracker = CallTracker(max_total=4, spawn=spawn, max_per_policy=2)
    tracker.start("a1", Operation.ATTACH, "greedy", "drv", _in_flight_until_closed, lambda: None)
    tracker.start("d1", Operation.DETACH, "greedy", "drv", _in_flight_until_closed, lambda: None)
    assert not tracker.slot_free("greedy", max_attaches=100), "its share is used up"
    assert tracker.slot_free("modest", max_attaches=1), "the others still get slots"
    await tracker.close()
