"""Section 7.9's status write: its reasons, its backoff and its patch (what each answer means is
the client's, tests/test_core_retries.py)."""

from __future__ import annotations

from operators.poolstatus.writes import TRANSIENT_BACKOFF, rejection_reason, status_patch


def test_rejection_reason() -> None:
    assert [rejection_reason(c) for c in (400, 413, 422)] == ["invalid", "too_large", "invalid"]


def test_a_failed_write_waits_one_second_doubling_to_a_minute() -> None:
    assert [TRANSIENT_BACKOFF.delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert TRANSIENT_BACKOFF.delay(1000) == 60


def test_patch_carries_the_resource_version() -> None:
    assert status_patch("42", {"poolCount": 0}) == {
        "metadata": {"resourceVersion": "42"},
        "status": {"poolCount": 0},
    }
