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
429, 5xx, network  transient: retry with backoff, no limit
anything else      the server refuses the operator (401, 403, ...): not retried, since
                   only a change outside the operator (credentials, RBAC) can help
=================  =================================================================

A 2xx answer can still have lost part of the status: kube-apiserver drops the fields its
version of the type does not have (unknown fields only warn by default), as 1.36's built-in
``v1alpha3`` does with the summaries, and a CRD's structural schema prunes them.
:func:`dropped_fields` finds them in the returned object.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

MAX_CONFLICT_RETRIES = 5
_FIRST_BACKOFF_SECONDS = 1.0
_MAX_BACKOFF_SECONDS = 60.0


class WriteFailure(enum.Enum):
    GONE = "gone"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    TRANSIENT = "transient"
    REFUSED = "refused"


def classify(status_code: int) -> WriteFailure:
    if status_code == 404:
        return WriteFailure.GONE
    if status_code == 409:
        return WriteFailure.CONFLICT
    if status_code in (400, 413, 422):
        return WriteFailure.REJECTED
    # Status 0 is a transport failure: no answer came.
    if status_code in (0, 429) or status_code >= 500:
        return WriteFailure.TRANSIENT
    return WriteFailure.REFUSED


def rejection_reason(status_code: int) -> str:
    """The ``reason`` label of ``status_rejected_total``."""
    return "too_large" if status_code == 413 else "invalid"


def backoff(attempt: int) -> float:
    """Delay before retry number ``attempt`` (0-based) of a transient failure: 1 s doubling to 60 s."""
    return float(min(_FIRST_BACKOFF_SECONDS * 2.0 ** min(attempt, 16), _MAX_BACKOFF_SECONDS))


def status_patch(resource_version: str, status: dict[str, Any]) -> dict[str, Any]:
    """The merge patch for ``/status``: the whole status, guarded by ``resourceVersion``."""
    return {"metadata": {"resourceVersion": resource_version}, "status": status}


def dropped_fields(written: Mapping[str, Any], returned: object) -> tuple[str, ...]:
    """The fields of the ``written`` status that the server's ``returned`` status lacks, as sorted
    paths below ``status`` with list items as ``[]`` (``pools[].partitionSummary``), each once.

    Only absence counts: a value the server normalised (a quantity, a time) was kept. An empty
    value written (0, "", false, [], {}) proves nothing, since Go's ``omitempty`` leaves it out of
    the answer too; nor does an answer without a status (``returned`` not a mapping). Lists are
    compared item by item only when their lengths agree.
    """
    if not isinstance(returned, Mapping):
        return ()
    found: set[str] = set()
    _collect_dropped(written, returned, "", found)
    return tuple(sorted(found))


def _collect_dropped(written: object, returned: object, path: str, found: set[str]) -> None:
    if isinstance(written, Mapping) and isinstance(returned, Mapping):
        for key, value in written.items():
            child = f"{path}.{key}" if path else str(key)
            if key in returned:
                _collect_dropped(value, returned[key], child, found)
            elif value not in (None, 0, "", False, [], {}):
                found.add(child)
    elif isinstance(written, list) and isinstance(returned, list) and len(written) == len(returned):
        for written_item, returned_item in zip(written, returned, strict=True):
            _collect_dropped(written_item, returned_item, f"{path}[]", found)
