"""A rate-limited, de-duplicating work queue with delayed adds, as client-go's.

Contract (the controllers rely on it):

- A key waiting in the queue is held once, however often it is added.
- A key is never handed to two workers at once. A key added while it is being processed
  is queued again when its worker calls :meth:`WorkQueue.done`, so no change is lost.
- :meth:`add_after` keeps the earliest pending time per key, so a far-future re-check never
  postpones a sooner one. A delay that is not a finite number (infinity, NaN) is logged and
  taken as the longest failure backoff: no key is ever left without a time to run.
- :meth:`add_rate_limited` applies client-go's default controller limiter: the larger of a
  per-key exponential backoff (5 ms x 2^(failures-1), capped at 1000 s) and an overall token
  bucket (10/s, burst 100). :meth:`forget` resets the key's failures after a success.
- The queue is *gated*: workers receive nothing until :meth:`open` is called. Controllers open
  it when the informers' initial listing is complete, so no decision is made on a partial view.
- A periodic key (:meth:`every`, as upstream's ``wait.Until``) is added again ``interval``
  seconds after each completion of its sync, whatever the sync returned or raised: it is never
  lost, and, being one key, never run by two workers at once.
- An added key wakes one idle worker, as client-go's ``cond.Signal()``. Waking all of them
  (an :class:`asyncio.Event`, as before) made the 49 others of 50 idle workers run only to
  wait again: 0.1 ms of CPU per added key, and a 1000-pod burst adds 2000 keys.

All methods are synchronous and must be called from the event loop that runs the workers;
watch handlers call them without awaiting anything. What a sync returns decides what happens
to its key (:mod:`.reconcile`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from .backoff import Backoff
from .keys import Key
from .metrics import WorkQueueMetrics
from .models import UnparsableObject, log_skipped
from .ratelimit import TokenBucket
from .reconcile import Done, GiveUp, Requeue, Result, Retry

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        overall_qps: float = 10.0,
        overall_burst: int = 100,
    ) -> None:
        self.name = name
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._waiting: dict[K, float] = {}
        # Periodic keys: their interval, and while when they re-arm (None: always).
        self._periodic: dict[K, tuple[float, Callable[[], bool] | None]] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._per_key = Backoff(base_delay, 2.0, max_delay)
        self._bucket = TokenBucket(overall_qps, overall_burst)
        # Idle workers, oldest first; each waits on its own future (see _wake_one).
        self._idle: deque[asyncio.Future[None]] = deque()
        self._drained = asyncio.Event()
        self._timer_wakeup = asyncio.Event()
        self._open = asyncio.Event()
        self._shutting_down = False
        self.metrics = WorkQueueMetrics(name)
        self.metrics.bind(self)

    # -- adding ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self.metrics.added()
        self._dirty.add(key)
        self._added_at.setdefault(key, time.monotonic())
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        if self._shutting_down:
            return
        if not math.isfinite(delay):
            # Infinity would never come due, and NaN breaks the order of the heap: at its top,
            # it holds back every other key. Waiting as long as the longest failure backoff keeps
            # the key alive whatever computed the delay.
            delay_instead = self._per_key.maximum
            log.warning("%s: a delay of %s for %s; waiting %gs instead", self.name, delay, key, delay_instead)
            delay = delay_instead
        due = time.monotonic() + delay
        current = self._waiting.get(key)
        if current is not None and current <= due:
            return
        self._waiting[key] = due
        heapq.heappush(self._heap, (due, next(self._seq), key))
        self._timer_wakeup.set()

    def add_rate_limited(self, key: K, at_least: float = 0.0) -> None:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        per_key = self._per_key.delay(failures - 1)
        self.metrics.retried()
        self.add_after(key, max(per_key, self._bucket.reserve(), at_least))

    def every(
        self,
        key: K,
        interval: float,
        *,
        first: float | None = 0.0,
        repeat_while: Callable[[], bool] | None = None,
    ) -> None:
        """Run ``key`` periodically: first after ``first`` seconds (0: now, None: once something
        adds it), then ``interval`` seconds after each completion of its sync, whether it returned or
        raised, for as long as ``repeat_while()`` holds (always without it).

        The re-arm is one more :meth:`add_after`, so the earliest pending time still wins: a failed
        sync is retried on its backoff when that is sooner than ``interval``. Like any key, a
        periodic key only runs once the queue is open, and never in two workers at once.
        """
        self._periodic[key] = (interval, repeat_while)
        if first is not None:
            self.add_after(key, first)

    def _rearm(self, key: K) -> None:
        periodic = self._periodic.get(key)
        if periodic is None:
            return
        interval, repeat_while = periodic
        try:
            again = repeat_while is None or repeat_while()
        except Exception:  # a periodic key is never lost: when in doubt it runs again
            log.exception("cannot tell whether %s should run again; it will", key)
            again = True
        if again:
            self.add_after(key, interval)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    # -- taking ---------------------------------------------------------------------------

    def open(self) -> None:
        """Let workers take keys: the initial listing of every watched kind is complete."""
        if not self._open.is_set():
            log.info("work queue %s opened with %d keys", self.name, len(self._queue))
            self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def get(self) -> K:
        await self._open.wait()
        while True:
            # Checked before the queue too: a worker woken for a key may run only after shutdown()
            # has counted the running syncs, and then it must not start another.
            if self._shutting_down:
                raise asyncio.CancelledError
            if self._queue:
                break
            wakeup = asyncio.get_running_loop().create_future()
            self._idle.append(wakeup)
            try:
                await wakeup
            except asyncio.CancelledError:
                if wakeup.done() and not wakeup.cancelled():
                    # Woken for a key and cancelled before taking it: another worker takes it.
                    self._wake_one()
                else:
                    with contextlib.suppress(ValueError):  # already skipped by _wake_one
                        self._idle.remove(wakeup)
                raise
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        now = time.monotonic()
        self._started_at[key] = now
        self.metrics.taken(now - self._added_at.pop(key, now))
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if not self._processing:
            self._drained.set()
        started = self._started_at.pop(key, None)
        if started is not None:
            self.metrics.worked(time.monotonic() - started)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def idle_workers(self) -> int:
        """Workers waiting for a key (not counting one already woken for a key)."""
        return sum(1 for wakeup in self._idle if not wakeup.done())

    def idle(self) -> bool:
        return not self._queue and not self._processing

    def running_times(self) -> list[float]:
        now = time.monotonic()
        return [now - t for t in self._started_at.values()]

    def _wake_one(self) -> None:
        while self._idle:
            wakeup = self._idle.popleft()
            if not wakeup.done():
                wakeup.set_result(None)
                return

    # -- running ---------------------------------------------------------------------------

    async def _timer(self) -> None:
        while True:
            now = time.monotonic()
            while self._heap and self._heap[0][0] <= now:
                due, _, key = heapq.heappop(self._heap)
                if self._waiting.get(key) == due:
                    del self._waiting[key]
                    self.add(key)
            timeout = self._heap[0][0] - now if self._heap else None
            self._timer_wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timer_wakeup.wait(), timeout)

    async def run(self, workers: int, sync: Callable[[K], Awaitable[Result | None]]) -> None:
        """Run the delay timer and ``workers`` workers until cancelled."""
        tasks = [asyncio.create_task(self._timer(), name=f"{self.name}-timer")]
        tasks += [
            asyncio.create_task(self._worker(sync), name=f"{self.name}-worker-{i}") for i in range(workers)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def shutdown(self, grace: float) -> bool:
        """Stop handing out keys and give running syncs up to ``grace`` seconds to finish; whether
        they all did."""
        self._shutting_down = True
        while self._idle:
            self._wake_one()
        if self._processing:
            self._drained.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), grace)
        return not self._processing

    async def _worker(self, sync: Callable[[K], Awaitable[Result | None]]) -> None:
        while not self._shutting_down:
            try:
                key = await self.get()
            except asyncio.CancelledError:
                if self._shutting_down:
                    return
                raise
            try:
                result, error = await self._result_of(sync, key)
                self._act_on(key, result, error)
            finally:
                self._rearm(key)
                self.done(key)

    async def _result_of(
        self, sync: Callable[[K], Awaitable[Result | None]], key: K
    ) -> tuple[Result, Exception | None]:
        try:
            return (await sync(key) or Done()), None
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a failed sync is retried, never fatal to the worker
            # Transient API errors (timeouts, 409, 429, 5xx) mark themselves retryable: no traceback.
            unexpected = None if getattr(err, "retryable", False) else err
            return Retry(str(err), getattr(err, "retry_after", None)), unexpected

    def _act_on(self, key: K, result: Result, unexpected: Exception | None) -> None:
        if isinstance(result, Requeue):
            self.forget(key)
            self.add_after(key, result.after)
        elif isinstance(result, Retry):
            log.warning(
                "sync of %s failed (attempt %d): %s",
                key,
                self.failures(key) + 1,
                result.error,
                exc_info=unexpected,
            )
            self.add_rate_limited(key, at_least=result.after or 0.0)
        elif isinstance(result, GiveUp):
            log.warning("not retrying %s: %s", key, result.error, extra={"object": key})
            self.forget(key)
        else:
            self.forget(key)


def route(
    queue: WorkQueue[Key],
    kind: str,
    update: Callable[[Mapping[str, Any]], Iterable[str]],
    body: Mapping[str, Any],
    delay: float,
    log: logging.Logger,
) -> bool:
    """A watch callback's one job: ``update`` feeds ``body`` to the cache and names the objects of
    ``kind`` it concerns, which are queued after ``delay`` so that a burst of events is one sync each.
    A body that does not parse is logged on the operator's ``log`` and skipped: a watch callback must
    not fail, or one malformed object would stop the others from being handled. Whether ``body``
    was read: one that was not is the caller's to forget."""
    try:
        names = update(body)
    except UnparsableObject as error:
        log_skipped(log, error)
        return False
    for name in names:
        queue.add_after(Key(kind, "", name), delay)
    return True
