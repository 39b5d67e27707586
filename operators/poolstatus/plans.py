"""What the pool-status operator writes, as plans for the core's executor (``operators.core.plan``).

A request's evaluation (:func:`.status.decide`) becomes one plan: wait (``Deferred``), or write
the status once (``Completed``). The status write tolerates no answer: each failure has a
follow-up that needs the error and the process's memory of the request (a re-read on 409, the
Failed status on 400/413/422, the request's own backoff otherwise; the client's ``Answer`` tells
them apart), so the executor raises it to the sync. The TTL sweep's deletion ends early on 404
and 409, which are not errors but are not deletions either: only a deletion is counted.
"""

from __future__ import annotations

from operators.core.plan import Delete, Patch, Plan
from operators.core.reconcile import Done, Requeue

from . import writes
from .status import Deferred, Evaluation

ALREADY_GONE = Done("deleted already")
NAME_REUSED = Done("the name belongs to a new request (UID precondition)")


def request_plan(path: str, resource_version: str, evaluation: Evaluation) -> Plan:
    """The plan of one request whose ``/status`` is at ``path``, read at ``resource_version``."""
    if isinstance(evaluation, Deferred):
        return Plan(
            (), Requeue(evaluation.retry_after, f"{evaluation.incomplete_listed} listed pools incomplete")
        )
    return Plan(
        (Patch(path, writes.status_patch(resource_version, evaluation.status), tolerate=frozenset()),)
    )


def expiry_plan(path: str, uid: str) -> Plan:
    """Delete the expired request at ``path`` if it is still the one with ``uid``."""
    deletion = Delete(
        path,
        uid,
        propagation="Background",
        tolerate=frozenset(),
        ends={404: ALREADY_GONE, 409: NAME_REUSED},
    )
    return Plan((deletion,))
