"""The token bucket of the core, asked with a clock of the caller's (``try_take``): no test sleeps."""

from __future__ import annotations

import itertools

import pytest

from operators.core.ratelimit import TokenBucket


def test_try_take_takes_only_what_is_there_and_says_when_the_next_token_comes() -> None:
    bucket = TokenBucket(6 / 60, 1, now=100.0)
    assert bucket.try_take(100.0) == 0.0
    assert bucket.try_take(100.0) == pytest.approx(10.0)
    # Asking again takes nothing: the wait shrinks with time only.
    assert bucket.try_take(104.0) == pytest.approx(6.0)
    assert bucket.try_take(110.0) == 0.0
    assert bucket.full(110.0) is False
    assert bucket.full(120.0) is True


def test_a_new_rate_applies_from_now_and_keeps_what_refilled() -> None:
    bucket = TokenBucket(6 / 60, 1, now=0.0)
    assert bucket.try_take(0.0) == 0.0
    bucket.set_qps(60 / 60, 5.0)  # half a token refilled at the old rate
    assert bucket.try_take(5.0) == pytest.approx(0.5)
    assert bucket.try_take(5.5) == 0.0


def test_over_a_long_run_a_burst_of_one_never_exceeds_the_rate() -> None:
    bucket, now, taken = TokenBucket(6 / 60, 1, now=0.0), 0.0, []
    while now < 600.0:
        wait = bucket.try_take(now)
        if wait == 0.0:
            taken.append(now)
        now += max(wait, 0.5)
    assert all(b - a >= 10.0 - 1e-9 for a, b in itertools.pairwise(taken))
    assert len(taken) == 60
