"""The core's retry rules: what an API error means (``Answer``), how long to wait (``Backoff``), and
how long a server may make us wait (``retry_after_seconds``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.core.backoff import Backoff
from operators.core.client import (
    MAX_RETRY_AFTER_SECONDS,
    Answer,
    ApiError,
    answer_of,
    bounded_retry_after,
    retry_after_seconds,
)


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (404, Answer.GONE),
        (409, Answer.CONFLICT),
        (400, Answer.INVALID),
        (413, Answer.INVALID),
        (422, Answer.INVALID),
        (0, Answer.TRANSIENT),
        (408, Answer.TRANSIENT),
        (429, Answer.TRANSIENT),
        (500, Answer.TRANSIENT),
        (503, Answer.TRANSIENT),
        (504, Answer.TRANSIENT),
        (401, Answer.REFUSED),
        (403, Answer.REFUSED),
        (405, Answer.REFUSED),
        (410, Answer.REFUSED),
        (415, Answer.REFUSED),
    ],
)
def test_each_status_has_one_meaning(status: int, answer: Answer) -> None:
    assert answer_of(status) is answer
    assert ApiError(status, "", "").answer is answer


@pytest.mark.parametrize("status", [0, 408, 409, 429, 502])
def test_what_is_worth_sending_again(status: int) -> None:
    assert ApiError(status, "", "").retryable


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_what_is_not_worth_sending_again(status: int) -> None:
    assert not ApiError(status, "", "").retryable


def test_the_delay_doubles_to_its_cap() -> None:
    assert [Backoff(1.0, 2.0, 60.0).delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert Backoff(2.0, 1.5, 15.0).delay(3) == 6.75


def test_jitter_spreads_the_delay_evenly_around_it() -> None:
    backoff = Backoff(10.0, 2.0, 100.0, jitter=0.2)
    assert backoff.delay(0, rand=lambda: 0.0) == pytest.approx(8.0)
    assert backoff.delay(0, rand=lambda: 0.5) == pytest.approx(10.0)
    assert backoff.delay(0, rand=lambda: 0.999999) == pytest.approx(12.0, rel=1e-5)


def test_a_retry_count_past_the_float_range_waits_the_cap() -> None:
    # Before the core's Backoff, bindingattacher's raised OverflowError from retry 1024 of a
    # detach (5 s doubling to 300 s: some 85 hours of a detach endpoint that stays down).
    assert Backoff(5.0, 2.0, 300.0, jitter=0.2).delay(1024, rand=lambda: 0.5) == 300.0
    assert Backoff(0.005, 2.0, 1000.0).delay(10**9) == 1000.0
    assert Backoff(1.0, 2.0).delay(5000) == math.inf


@given(
    initial=st.floats(0.001, 100.0),
    factor=st.floats(1.0, 10.0),
    maximum=st.floats(0.001, 1e6),
    retries=st.integers(-5, 10**6),
    rand=st.floats(0.0, 1.0, exclude_max=True),
)
def test_a_delay_is_never_negative_nor_past_its_jittered_cap(
    initial: float, factor: float, maximum: float, retries: int, rand: float
) -> None:
    backoff = Backoff(initial, factor, maximum, jitter=0.2)
    delay = backoff.delay(retries, rand=lambda: rand)
    assert 0.0 <= delay <= maximum * 1.2
    assert backoff.delay(retries + 1, rand=lambda: rand) >= delay


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("", None),
        ("0", 0.0),
        ("3", 3.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("-5", None),
        ("+5", None),
        ("nan", None),
        ("NaN", None),
        ("inf", None),
        ("Infinity", None),
        ("1e9", None),
        ("1_000", None),
        ("\u0663", None),  # ARABIC-INDIC DIGIT THREE, which float() reads as 3
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("1000", 1000.0),
        ("1000000000", MAX_RETRY_AFTER_SECONDS),
        ("9" * 400, MAX_RETRY_AFTER_SECONDS),  # float() makes this infinity
    ],
)
def test_a_retry_after_header_is_a_bounded_number_of_seconds(
    header: str | None, seconds: float | None
) -> None:
    assert retry_after_seconds(header) == seconds


@pytest.mark.parametrize(
    ("asked", "seconds"),
    [
        (None, None),
        (0, 0.0),
        (2.5, 2.5),
        (-1.0, None),
        (math.nan, None),
        (math.inf, MAX_RETRY_AFTER_SECONDS),
        (1e9, MAX_RETRY_AFTER_SECONDS),
        (10**400, MAX_RETRY_AFTER_SECONDS),
    ],
)
def test_a_wait_someone_else_asked_for_is_bounded(asked: float | None, seconds: float | None) -> None:
    assert bounded_retry_after(asked) == seconds
