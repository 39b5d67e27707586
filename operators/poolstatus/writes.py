"""How a status write is sent, and what each answer of the API server means (spec section 7.9).

The status goes to the ``/status`` subresource as one JSON merge patch that carries the
``resourceVersion`` the evaluation read: the API server then rejects the write with 409 if
the request changed meanwhile, so a status computed from an older view never lands on a
request that someone else (the in-tree controller, a second operator) has answered.

What an error answer means is the client's table (:class:`~operators.core.client.Answer`); what
the controller does with it is section 7.9's:

================================  ==========================================================
answer                            follow-up
================================  ==========================================================
2xx                               written
``GONE`` (404)                    the request is gone: forget it
``CONFLICT`` (409)                the request changed since it was read (maybe another
                                  writer): read it again
``INVALID`` (400, 413, 422)       the server refuses this status: write the Failed one
``TRANSIENT`` (network, 408,      retry with :data:`TRANSIENT_BACKOFF`, no limit
429, 5xx)
``REFUSED`` (401, 403, ...)       not retried: only a change outside the operator
                                  (credentials, RBAC) can help
================================  ==========================================================

A 2xx answer can still have lost part of the status: kube-apiserver drops the fields its
version of the type does not have (unknown fields only warn by default), as 1.36's built-in
``v1alpha3`` does with the summaries, and a CRD's structural schema prunes them.
:func:`dropped_fields` finds them in the returned object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.core.backoff import Backoff

MAX_CONFLICT_RETRIES = 5
TRANSIENT_BACKOFF = Backoff(initial=1.0, factor=2.0, maximum=60.0)
"""Before retry ``n`` of a failed status write: 1 s doubling to 60 s, with no retry limit."""


def rejection_reason(status_code: int) -> str:
    """The ``reason`` label of ``status_rejected_total``."""
    return "too_large" if status_code == 413 else "invalid"


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
