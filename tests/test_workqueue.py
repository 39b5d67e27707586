"""The work queue's contract (module docstring of operators.core.workqueue), on the event loop
without any cluster."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from operators.core.keys import Key
from operators.core.models import UnparsableObject
from operators.core.reconcile import GiveUp, Requeue, Result, Retry
from operators.core.workqueue import WorkQueue, route

TICK = 0.5  # the longest any wait below may take; the waits end on events, not on time


async def _settle() -> None:
    """Let every task that can run, run (a few loop iterations)."""
    for _ in range(5):
        await asyncio.sleep(0)


def _queue() -> WorkQueue[str]:
    queue: WorkQueue[str] = WorkQueue("unit")
    queue.open()
    return queue


@contextlib.asynccontextmanager
async def _running(
    queue: WorkQueue[Any], workers: int, sync: Callable[[Any], Awaitable[Result | None]]
) -> AsyncIterator[None]:
    runner = asyncio.create_task(queue.run(workers, sync))
    try:
        yield
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_a_waiting_key_is_held_once() -> None:
    queue = _queue()
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_a_key_added_while_processed_is_handed_out_again_only_after_done() -> None:
    queue = _queue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    assert len(queue) == 0, "never to two workers at once"
    second = asyncio.create_task(queue.get())
    await _settle()
    assert not second.done()
    queue.done(key)
    assert await asyncio.wait_for(second, TICK) == "a", "the change made meanwhile is not lost"


async def test_workers_get_nothing_until_the_queue_is_opened() -> None:
    queue: WorkQueue[str] = WorkQueue("unit")
    queue.add("a")
    taker = asyncio.create_task(queue.get())
    await _settle()
    assert not taker.done()
    queue.open()
    assert await asyncio.wait_for(taker, TICK) == "a"


async def test_an_added_key_wakes_exactly_one_idle_worker() -> None:
    queue = _queue()
    takers = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    assert queue.idle_workers == 3
    queue.add("a")
    assert queue.idle_workers == 2
    await _settle()
    assert sum(taker.done() for taker in takers) == 1
    assert queue.idle_workers == 2
    queue.add("b")
    await _settle()
    assert sorted(taker.result() for taker in takers if taker.done()) == ["a", "b"]
    for taker in takers:
        taker.cancel()
    await asyncio.gather(*takers, return_exceptions=True)
    assert queue.idle_workers == 0


async def test_a_worker_cancelled_after_its_wakeup_passes_the_key_on() -> None:
    queue = _queue()
    first = asyncio.create_task(queue.get())
    await _settle()
    second = asyncio.create_task(queue.get())
    await _settle()
    queue.add("a")  # wakes the first worker, which is cancelled before it runs
    first.cancel()
    assert await asyncio.wait_for(second, TICK) == "a"
    assert first.cancelled()


async def test_a_busy_worker_takes_a_key_added_while_none_was_idle() -> None:
    queue = _queue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("b")  # nobody idle: no wakeup to hand out
    assert await asyncio.wait_for(queue.get(), TICK) == "b"


async def test_shutdown_releases_every_idle_worker() -> None:
    queue = _queue()
    takers = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    await queue.shutdown(0)
    results = await asyncio.wait_for(asyncio.gather(*takers, return_exceptions=True), TICK)
    assert all(isinstance(result, asyncio.CancelledError) for result in results)


async def test_a_worker_woken_for_a_key_takes_none_once_shutting_down() -> None:
    """shutdown() waits for the syncs running when it is called; no other may start after it."""
    queue = _queue()
    started: list[str] = []

    async def sync(key: str) -> None:
        started.append(key)

    async with _running(queue, 1, sync):
        await _settle()
        queue.add("a")  # wakes the idle worker, which has not run yet
        assert await queue.shutdown(TICK)
        await _settle()
    assert started == []


async def test_shutdown_says_whether_the_running_syncs_finished_in_time() -> None:
    queue = _queue()
    running, finish = asyncio.Event(), asyncio.Event()

    async def sync(key: str) -> None:
        running.set()
        await finish.wait()

    async with _running(queue, 1, sync):
        queue.add("a")
        await asyncio.wait_for(running.wait(), TICK)
        assert not await queue.shutdown(0.01)
        finish.set()


async def test_add_after_keeps_the_earliest_due_time() -> None:
    queue = _queue()
    queue.add_after("a", 0.05)
    queue.add_after("a", 60)
    assert queue.waiting == 1
    synced = asyncio.Event()

    async def sync(key: str) -> None:
        synced.set()

    async with _running(queue, 1, sync):
        # Had the 60 s add replaced the sooner one, this would time out.
        await asyncio.wait_for(synced.wait(), 5)


def _due_in(queue: WorkQueue[str], key: str) -> float:
    # The pending time is not public; the queue's own tests read it rather than sleep through it.
    return queue._waiting.pop(key) - time.monotonic()


def test_rate_limited_retries_back_off_exponentially_per_key_until_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue("unit", base_delay=1.0, overall_qps=1000, overall_burst=1000)
    dues = []
    for _ in range(4):
        queue.add_rate_limited("a")
        dues.append(_due_in(queue, "a"))
    assert [round(due) for due in dues] == [1, 2, 4, 8]
    assert queue.failures("a") == 4
    queue.forget("a")
    queue.add_rate_limited("a")
    assert round(_due_in(queue, "a")) == 1


def test_a_retry_after_is_honoured_when_longer_than_the_backoff() -> None:
    queue: WorkQueue[str] = WorkQueue("unit")
    queue.add_rate_limited("a", at_least=30)
    assert 29 < _due_in(queue, "a") <= 30


@pytest.mark.parametrize("delay", [math.nan, math.inf])
async def test_a_delay_that_is_not_a_finite_number_holds_back_no_key(delay: float) -> None:
    queue = _queue()
    synced: list[str] = []
    b_synced = asyncio.Event()

    async def sync(key: str) -> Result | None:
        synced.append(key)
        if key == "a":
            return Requeue(delay)
        b_synced.set()
        return None

    queue.add("a")
    async with _running(queue, 1, sync):
        await _until(lambda: synced == ["a"])
        queue.add_after("b", 0.01)
        # A NaN due time at the top of the heap held every later key back.
        await asyncio.wait_for(b_synced.wait(), 5)
    assert 0 < _due_in(queue, "a") <= 1000, "the key waits the longest failure backoff, not forever"


async def test_a_failed_sync_is_retried_and_a_retry_request_is_not_a_failure() -> None:
    queue = _queue()
    calls: list[str] = []
    finished = asyncio.Event()

    async def sync(key: str) -> Result | None:
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("transient")
        if len(calls) == 2:
            return Requeue(0.01)
        finished.set()
        return None

    queue.add("a")
    async with _running(queue, 2, sync):
        await asyncio.wait_for(finished.wait(), 5)
    assert calls == ["a", "a", "a"]
    assert queue.failures("a") == 0, "a success forgets the failures"


async def _sync_once(queue: WorkQueue[str], result: Result) -> None:
    """Runs one sync of key "a" that returns ``result``."""
    synced = asyncio.Event()

    async def sync(key: str) -> Result:
        synced.set()
        return result

    queue.add("a")
    async with _running(queue, 1, sync):
        await asyncio.wait_for(synced.wait(), 5)
        await _settle()


async def test_a_retry_result_is_a_failure_no_sooner_than_its_after() -> None:
    queue = _queue()
    await _sync_once(queue, Retry("conflict", after=30))
    assert queue.failures("a") == 1
    assert 29 < _due_in(queue, "a") <= 30


async def test_a_requeue_is_not_a_failure_and_forgets_earlier_ones() -> None:
    queue = _queue()
    queue._failures["a"] = 3  # as after three failed syncs, without their pending retry
    await _sync_once(queue, Requeue(30, "not due"))
    assert queue.failures("a") == 0
    assert 29 < _due_in(queue, "a") <= 30


async def test_give_up_logs_and_does_not_requeue(caplog: pytest.LogCaptureFixture) -> None:
    queue = _queue()
    await _sync_once(queue, GiveUp("the template does not exist"))
    assert queue.failures("a") == 0
    assert "a" not in queue._waiting
    assert queue.idle()
    assert "not retrying a: the template does not exist" in caplog.text


@pytest.mark.parametrize("workers", [1, 50])
async def test_every_added_key_is_synced_once_with_any_number_of_workers(workers: int) -> None:
    synced: list[int] = []
    all_done = asyncio.Event()

    async def sync(key: int) -> None:
        await asyncio.sleep(0)
        synced.append(key)
        if len(synced) == 200:
            all_done.set()

    int_queue: WorkQueue[int] = WorkQueue("unit")
    int_queue.open()
    async with _running(int_queue, workers, sync):
        for key in range(200):
            int_queue.add(key)
            if key % 7 == 0:
                await asyncio.sleep(0)
        await asyncio.wait_for(all_done.wait(), 5)
        await _settle()
    assert sorted(synced) == list(range(200))


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``condition`` on the event loop until it holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def _timed_runs() -> tuple[list[float], Callable[[str], Awaitable[None]]]:
    """A sync that records when each of its runs started, and that list."""
    runs: list[float] = []

    async def sync(key: str) -> None:
        runs.append(time.monotonic())

    return runs, sync


async def test_a_periodic_key_runs_now_and_again_every_interval_after_each_completion() -> None:
    queue = _queue()
    runs, sync = _timed_runs()
    started = time.monotonic()
    queue.every("tick", 0.05)
    async with _running(queue, 4, sync):
        await _until(lambda: len(runs) >= 4)
    assert runs[0] - started < 0.05, "first=0 runs at once"
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert all(gap >= 0.045 for gap in gaps), gaps


async def test_a_periodic_key_can_first_run_after_one_interval() -> None:
    queue = _queue()
    runs, sync = _timed_runs()
    started = time.monotonic()
    queue.every("tick", 0.1, first=0.1)
    assert len(queue) == 0
    assert queue.waiting == 1
    async with _running(queue, 1, sync):
        await _until(lambda: len(runs) >= 1)
    assert runs[0] - started >= 0.095


async def test_a_periodic_key_is_not_run_before_the_queue_opens() -> None:
    queue: WorkQueue[str] = WorkQueue("unit")
    runs: list[str] = []

    async def sync(key: str) -> None:
        runs.append(key)

    queue.every("tick", 60)
    async with _running(queue, 1, sync):
        await _settle()
        assert runs == []
        queue.open()
        await _until(lambda: runs == ["tick"])


async def test_a_periodic_key_re_arms_after_a_sync_that_raises() -> None:
    queue: WorkQueue[str] = WorkQueue("unit", base_delay=60.0)  # the retry never comes first
    queue.open()
    runs: list[str] = []

    async def sync(key: str) -> None:
        runs.append(key)
        if len(runs) <= 2:
            raise RuntimeError("the sweep failed")

    queue.every("sweep", 0.02)
    async with _running(queue, 2, sync):
        await _until(lambda: len(runs) >= 3)
    assert queue.failures("sweep") == 0, "the run that succeeded forgot the failures"


async def test_a_failed_periodic_run_is_retried_on_its_backoff_when_that_is_sooner() -> None:
    queue = _queue()
    runs: list[str] = []

    async def sync(key: str) -> None:
        runs.append(key)
        if len(runs) == 1:
            raise RuntimeError("transient")

    queue.every("sweep", 60)
    async with _running(queue, 1, sync):
        await _until(lambda: len(runs) == 2)
        await _settle()
    assert 59 < _due_in(queue, "sweep") <= 60, "re-armed after the retry succeeded"


async def test_a_periodic_key_is_never_run_twice_at_once_nor_duplicated() -> None:
    queue = _queue()
    running = 0
    most = 0
    runs = 0
    release = asyncio.Event()

    async def sync(key: str) -> None:
        nonlocal running, most, runs
        running += 1
        most = max(most, running)
        runs += 1
        await release.wait()
        running -= 1

    queue.every("tick", 0.01)
    async with _running(queue, 8, sync):
        await _until(lambda: runs == 1)
        for _ in range(5):
            queue.add("tick")  # a second add while it runs: queued once, run after done()
        queue.every("tick", 0.01)
        await _settle()
        assert (runs, len(queue)) == (1, 0)
        release.set()
        await _until(lambda: runs >= 3)
    assert most == 1


async def test_a_periodic_key_stops_re_arming_while_it_has_nothing_to_do_until_added_again() -> None:
    queue = _queue()
    pending = [True]
    runs: list[str] = []

    async def sync(key: str) -> None:
        runs.append(key)
        pending[0] = len(runs) < 2

    queue.every("confirm", 0.01, first=None, repeat_while=lambda: pending[0])
    async with _running(queue, 1, sync):
        await _settle()
        assert runs == [], "first=None: nothing until something adds it"
        queue.add_after("confirm", 0.01)
        await _until(lambda: len(runs) == 2)
        await _settle()
        assert queue.waiting == 0, "nothing left to do: not re-armed"
        assert len(queue) == 0
        pending[0] = True
        queue.add("confirm")
        await _until(lambda: len(runs) >= 3)


def test_route_queues_what_the_update_names_and_skips_an_unparsable_body(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[Key] = WorkQueue("unit")
    queue.open()
    log = logging.getLogger("unit.route")
    assert route(queue, "selector", lambda body: ["a", "b"], {}, 60, log)
    assert queue.waiting == 2

    def unparsable(body: Mapping[str, Any]) -> list[str]:
        raise UnparsableObject("Thing t", "1 invalid field(s)")

    with caplog.at_level(logging.WARNING, logger="unit.route"):
        assert not route(queue, "selector", unparsable, {}, 60, log)
    assert queue.waiting == 2
    assert [r.message for r in caplog.records] == [
        "skipping Thing t that cannot be parsed: 1 invalid field(s)"
    ]
