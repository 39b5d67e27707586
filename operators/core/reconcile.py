"""What a sync tells its work queue: the one result vocabulary of every operator.

A controller's ``sync(key)`` reads its cache, decides, writes, and returns one of these, as
upstream's ``syncPod``/``handleClaim`` return an error or a requeue-after. The queue acts on
it (:meth:`~operators.core.workqueue.WorkQueue.run`):

- :class:`Done` (or ``None``): the key's failure count is forgotten.
- :class:`Requeue`: called again after ``after`` seconds. Expected waiting, not a failure:
  the failure count is forgotten, as controller-runtime does for ``RequeueAfter``.
- :class:`Retry`: a failure. Re-added rate-limited, never sooner than ``after`` (a 429's
  ``Retry-After``), and logged without a traceback because it was anticipated.
- :class:`GiveUp`: logged and forgotten. The input cannot change by itself, so only the next
  watch event re-evaluates the key.

An unexpected exception is a :class:`Retry` with a traceback in the log.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Done:
    reason: str = ""


@dataclass(frozen=True)
class Requeue:
    after: float
    why: str = ""


@dataclass(frozen=True)
class Retry:
    error: str
    after: float | None = None


@dataclass(frozen=True)
class GiveUp:
    error: str


Result = Done | Requeue | Retry | GiveUp
