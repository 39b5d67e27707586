"""Exponential backoff: the one rule for "how long until the next try", used by the work queue's
per-key limiter and by every controller that paces its own retries (status writes, evictions a
PodDisruptionBudget refuses, attach and detach calls).

The delay before retry ``n`` (0 for the first) is ``initial x factor^n``, capped at ``maximum``,
then spread by ``± jitter`` of itself. A retry count has no upper bound (a detach endpoint that
stays down is retried until the allocation goes), and a float power that outgrows the float raises
``OverflowError`` rather than giving infinity, so that case is the cap, not a failed sync.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    initial: float
    factor: float = 2.0
    maximum: float = math.inf
    jitter: float = 0.0
    """A fraction of the delay, spread evenly on either side; 0.2 gives ±20 %."""

    def delay(self, retries: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds before retry number ``retries`` (0 for the first retry); ``rand`` returns a
        number in [0, 1), a parameter so that a test can fix it."""
        try:
            grown = self.initial * float(self.factor) ** max(retries, 0)
        except OverflowError:
            grown = math.inf
        base = min(grown, self.maximum)
        if not self.jitter:
            return base
        return base * (1 - self.jitter + 2 * self.jitter * rand())
