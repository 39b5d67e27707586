"""The work queue's contract (module docstring of operators.core.workqueue), on the event loop
without any cluster."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from operators.core.reconcile import GiveUp, Requeue, Result, Retry
from operators.core.workqueue import WorkQueue

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
