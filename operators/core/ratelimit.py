"""Token buckets: the client-side QPS limit, the work queue's overall retry limit, and
devicetaint's eviction pacing.

All follow client-go's semantics: ``qps`` tokens refill per second up to ``burst``. A caller
of :meth:`TokenBucket.acquire` that finds the bucket empty waits for the next token instead of
failing; a caller that must not wait in place (a sync that returns ``Requeue``) asks
:meth:`TokenBucket.try_take` with its own clock. ``qps <= 0`` means unthrottled, which is what
the benchmarks' "unthrottled" tier uses.
"""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    def __init__(self, qps: float, burst: int, now: float | None = None) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic() if now is None else now
        self._lock = asyncio.Lock()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def try_take(self, now: float) -> float:
        """Take a token if one is there at ``now`` and return 0.0; else take nothing and return the
        seconds until one is. A caller that comes back then is not promised the token: unlike
        :meth:`reserve`, a caller that never comes back holds no token."""
        if self.unlimited:
            return 0.0
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.qps

    def full(self, now: float) -> bool:
        """Whether the bucket holds ``burst`` tokens at ``now``: it then acts as a new one would."""
        self._refill(now)
        return self.unlimited or self._tokens >= self.burst

    def set_qps(self, qps: float, now: float) -> None:
        """Change the rate from ``now`` on; the tokens refilled so far stay."""
        self._refill(now)
        self.qps = qps

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
