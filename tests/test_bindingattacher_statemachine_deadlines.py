from __future__ import annotations

from datetime import timedelta

import pytest
from bindingattacher_builders import T0

from operators.bindingattacher import statemachine as deadlines
from operators.bindingattacher.models import WaitingFor
from operators.bindingattacher.selection import node_wait_deadline
from operators.core.conditions import LATEST_TIME, parse_time
from operators.dra.durations import format_seconds, parse_go_duration


def test_parse_go_durations() -> None:
    assert parse_go_duration("30s") == timedelta(seconds=30)
    assert parse_go_duration("1m30s") == timedelta(seconds=90)
    assert parse_go_duration("1.5h") == timedelta(hours=1.5)
    assert parse_go_duration("250ms") == timedelta(milliseconds=250)
    assert parse_go_duration("0s") == timedelta(0)
    for bad in ("", "30", "-1s", "1d", "s", "1 s"):
        with pytest.raises(ValueError, match="is not a duration"):
            parse_go_duration(bad)
    assert format_seconds(timedelta(seconds=585)) == "585s"
    assert format_seconds(1.25) == "1.2s"


def test_attach_deadline_is_anchored_at_allocation() -> None:
    deadline = deadlines.attach_deadline(T0, timedelta(seconds=30), timedelta(seconds=8))
    assert deadline == T0 + timedelta(seconds=22)
    assert deadlines.scheduler_deadline(T0, timedelta(seconds=30)) == T0 + timedelta(seconds=30)


def test_deadlines_past_year_9999_are_the_end_of_time() -> None:
    stamp = parse_time("9999-12-31T23:59:59Z")
    assert deadlines.attach_deadline(stamp, timedelta(seconds=30), timedelta(seconds=8)) == LATEST_TIME
    assert deadlines.scheduler_deadline(stamp, timedelta(seconds=30)) == LATEST_TIME
    assert node_wait_deadline(stamp, timedelta(seconds=10), LATEST_TIME) == LATEST_TIME
    # A policy's bindingTimeout of two billion hours fits a timedelta, not a datetime from now.
    assert deadlines.attach_deadline(T0, timedelta(hours=2e9), timedelta(seconds=8)) == LATEST_TIME
    assert deadlines.attach_call_timeout(timedelta(seconds=60), LATEST_TIME, T0) == 60.0


def test_call_budget() -> None:
    deadline = T0 + timedelta(seconds=22)
    assert deadlines.attach_call_timeout(timedelta(seconds=60), deadline, T0) == 22.0
    assert deadlines.attach_call_timeout(timedelta(seconds=5), deadline, T0) == 5.0
    assert (
        deadlines.attach_call_timeout(timedelta(seconds=5), deadline, deadline + timedelta(seconds=1)) == 0.0
    )
    assert deadlines.can_start_attach(deadline, deadline - timedelta(seconds=1))
    assert not deadlines.can_start_attach(deadline, deadline - timedelta(milliseconds=999))


def test_backoff_grows_caps_and_jitters() -> None:
    middle = 0.5
    assert [deadlines.ATTACH_RETRY.delay(n, lambda: middle) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert deadlines.ATTACH_RETRY.delay(0, lambda: 0.0) == pytest.approx(0.8)
    assert deadlines.ATTACH_RETRY.delay(0, lambda: 1.0) == pytest.approx(1.2)
    assert deadlines.DETACH_RETRY.delay(10, lambda: middle) == 300
    assert deadlines.in_progress_backoff(3.0).delay(0, lambda: middle) == 3.0
    assert deadlines.in_progress_backoff(None).delay(1, lambda: middle) == 3.0
    assert deadlines.bounded_delay(10.0, T0 + timedelta(seconds=2), T0) == 2.0


def test_timeout_messages_name_what_was_awaited() -> None:
    slot = deadlines.timeout_message(WaitingFor.SLOT, waited=timedelta(seconds=585), max_attaches=20)
    assert slot == "timed out after 585s waiting for a free attach slot (maxAttaches=20)"
    previous = deadlines.timeout_message(WaitingFor.PREVIOUS_DETACH, waited=timedelta(0), previous_key="da-1")
    assert previous == "timed out waiting for detach of previous attachment da-1 of this device"
    plain = deadlines.timeout_message(WaitingFor.NOTHING, waited=timedelta(0), last_error="HTTP 503")
    assert plain == "the attach did not complete before the attach deadline: HTTP 503"
