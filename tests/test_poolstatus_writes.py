"""The status-write outcome table (spec section 7.9)."""

from __future__ import annotations

import pytest

from operators.poolstatus.writes import Outcome, backoff, classify, rejection_reason, status_patch


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (404, Outcome.GONE),
        (409, Outcome.CONFLICT),
        (422, Outcome.REJECTED),
        (400, Outcome.REJECTED),
        (413, Outcome.REJECTED),
        (429, Outcome.TRANSIENT),
        (500, Outcome.TRANSIENT),
        (503, Outcome.TRANSIENT),
        (0, Outcome.TRANSIENT),
    ],
)
def test_classify(code: int, outcome: Outcome) -> None:
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
