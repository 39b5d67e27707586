"""Token buckets: the client-side QPS limit and the work queue's overall retry limit.

Both follow client-go's semantics: ``qps`` tokens refill per second up to ``burst``; a caller
that finds the bucket empty waits for the next token instead of failing. ``qps <= 0`` means
unthrottled, which is what the benchmarks' "unthrottled" tier uses.
"""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def reserve(self) -> float:
        """Take a token now and return how long the caller must wait before using it."""
        if self.unlimited:
            return 0.0
        now = time.monotonic()
        self._refill(now)
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
