"""How a status write is sent, and what each answer of the API server means (spec section 7.9).

The status goes to the ``/status`` subresource as one JSON merge patch that carries the
``resourceVersion`` the evaluation read: the API server then rejects the write with 409 if
the request changed meanwhile, so a status computed from an older view never lands on a
request that someone else (the in-tree controller, a second operator) has answered.

The outcome table is pure so that it can be tested without a server:

=================  =================================================================
answer             meaning
=================  =================================================================
2xx                written
404                the request is gone
409                the request changed since it was read (maybe another writer)
400, 413, 422      the server refuses this status (invalid, or too large)
anything else      transient (429, 5xx, network): retry with backoff, no limit
=================  =================================================================
"""

from __future__ import annotations

import enum
from typing import Any

MAX_CONFLICT_RETRIES = 5
_FIRST_BACKOFF_SECONDS = 1.0
_MAX_BACKOFF_SECONDS = 60.0


class WriteFailure(enum.Enum):
    GONE = "gone"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    TRANSIENT = "transient"


def classify(status_code: int) -> WriteFailure:
    if status_code == 404:
        return WriteFailure.GONE
    if status_code == 409:
        return WriteFailure.CONFLICT
    if status_code in (400, 413, 422):
        return WriteFailure.REJECTED
    return WriteFailure.TRANSIENT


def rejection_reason(status_code: int) -> str:
    """The ``reason`` label of ``status_rejected_total``."""
    return "too_large" if status_code == 413 else "invalid"


def backoff(attempt: int) -> float:
    """Delay before retry number ``attempt`` (0-based) of a transient failure: 1 s doubling to 60 s."""
    return float(min(_FIRST_BACKOFF_SECONDS * 2.0 ** min(attempt, 16), _MAX_BACKOFF_SECONDS))


def status_patch(resource_version: str, status: dict[str, Any]) -> dict[str, Any]:
    """The merge patch for ``/status``: the whole status, guarded by ``resourceVersion``."""
    return {"metadata": {"resourceVersion": resource_version}, "status": status}
