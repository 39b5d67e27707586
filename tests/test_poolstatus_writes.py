"""The status-write outcome table (spec section 7.9)."""

from __future__ import annotations

import pytest

from operators.poolstatus.writes import WriteFailure, backoff, classify, rejection_reason, status_patch


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (404, WriteFailure.GONE),
        (409, WriteFailure.CONFLICT),
        (422, WriteFailure.REJECTED),
        (400, WriteFailure.REJECTED),
        (413, WriteFailure.REJECTED),
        (429, WriteFailure.TRANSIENT),
        (500, WriteFailure.TRANSIENT),
        (503, WriteFailure.TRANSIENT),
        (0, WriteFailure.TRANSIENT),
        (401, WriteFailure.REFUSED),
        (403, WriteFailure.REFUSED),
        (405, WriteFailure.REFUSED),
        (415, WriteFailure.REFUSED),
    ],
)
def test_classify(code: int, outcome: WriteFailure) -> None:
    assert classify(code) is outcome


def test_rejection_reason() -> None:
    assert [rejection_reason(c) for c in (400, 413, 422)] == ["invalid", "too_large", "invalid"]


def test_backoff_doubles_to_a_minute() -> None:
    assert [backoff(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff(1000) == 60


def test_patch_carries_the_resource_version() -> None:
    assert status_patch("42", {"poolCount": 0}) == {
        "metadata": {"resourceVersion": "42"},
        "status": {"poolCount": 0},
    }
