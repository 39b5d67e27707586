"""The shared conditions: transition times kept across merges, and comparison of read-back conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from operators.core.conditions import (
    FALSE,
    LATEST_TIME,
    TRUE,
    Condition,
    ObservedCondition,
    current,
    merge,
    parse_time,
    parse_time_or_none,
    reported,
    same_content,
    set_observed,
    status_differs,
    time_after,
)
from operators.core.models import KubeModel

EARLIER = "2026-03-01T11:00:00Z"
NOW = "2026-03-01T12:00:00Z"


def ready(status: str = TRUE, message: str = "m", generation: int | None = 2) -> Condition:
    return Condition(
        type="Ready",
        status=status,
        reason="Done",
        message=message,
        observed_generation=generation,
        last_transition_time=NOW,
    )


def test_merge_keeps_the_transition_time_while_the_status_holds() -> None:
    existing = [{"type": "Ready", "status": TRUE, "reason": "Old", "lastTransitionTime": EARLIER}]
    [entry] = merge(existing, ready(message="new"))
    assert entry == {
        "type": "Ready",
        "status": TRUE,
        "reason": "Done",
        "message": "new",
        "observedGeneration": 2,
        "lastTransitionTime": EARLIER,
    }


def test_merge_moves_the_transition_time_when_the_status_changes() -> None:
    existing = [{"type": "Ready", "status": FALSE, "lastTransitionTime": EARLIER}, {"type": "Other"}]
    assert merge(existing, ready()) == [ready().to_dict(), {"type": "Other"}]
    assert merge([], ready(), now=EARLIER)[0]["lastTransitionTime"] == EARLIER


def test_set_observed_stamps_every_condition_with_the_generation_and_keeps_the_others() -> None:
    other = {"type": "Other", "status": TRUE, "reason": "Kept", "lastTransitionTime": EARLIER}
    held = {"type": "Ready", "status": TRUE, "reason": "Old", "lastTransitionTime": EARLIER}
    invalid = Condition(type="Invalid", status=FALSE, reason="Valid")
    conditions = set_observed([other, held], 7, [ready(generation=None), invalid], NOW)
    assert conditions == [
        other,
        {**held, "reason": "Done", "message": "m", "observedGeneration": 7},
        {
            "type": "Invalid",
            "status": FALSE,
            "reason": "Valid",
            "message": "",
            "observedGeneration": 7,
            "lastTransitionTime": NOW,
        },
    ]


def test_observed_condition_reads_missing_fields_as_empty() -> None:
    observed = ObservedCondition.model_validate({"type": "Ready"})
    assert (observed.status, observed.reason, observed.message) == ("", "", "")
    assert observed.observed_generation is None
    assert observed.last_transition_time is None


def test_observed_condition_parses_the_transition_time() -> None:
    observed = ObservedCondition.model_validate({"type": "Ready", "lastTransitionTime": NOW})
    assert observed.last_transition_time == datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_written_is_the_condition_as_read_back() -> None:
    written = ObservedCondition.written(ready())
    assert written == ObservedCondition(
        type="Ready",
        status=TRUE,
        reason="Done",
        message="m",
        observed_generation=2,
        last_transition_time=datetime(2026, 3, 1, 12, tzinfo=UTC),
    )
    assert ObservedCondition.written(ready(generation=None)).observed_generation is None


def test_same_content_ignores_only_the_transition_time() -> None:
    moved = ready().model_copy(update={"last_transition_time": EARLIER})
    assert same_content(ready(), moved)
    assert not same_content(ready(), ready(message="other"))
    assert not same_content(ready(), ready(status=FALSE))
    assert not same_content(ready(), ready(generation=3))
    assert same_content(None, None)
    assert not same_content(ready(), None)


def test_same_content_compares_dicts_and_models_alike() -> None:
    written = ready().to_dict()
    observed = ObservedCondition.written(ready())
    assert same_content(written, observed)
    assert same_content(observed, ready())
    assert not same_content(ObservedCondition(type="Ready", status=TRUE), ready())


class PodCondition(KubeModel):
    """A condition model without observedGeneration, like a pod's."""

    type: str
    status: str = ""
    reason: str = ""
    message: str = ""


def test_same_content_of_a_model_without_generation() -> None:
    assert same_content(
        PodCondition(type="Ready", status=TRUE, reason="Done", message="m"), ready(generation=None)
    )
    assert not same_content(PodCondition(type="Ready", status=TRUE, reason="Done", message="m"), ready())


def test_reported_needs_the_same_status_reason_and_generation() -> None:
    status = {
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": FALSE, "reason": "Invalid"}],
    }
    assert reported(status, "Ready", FALSE, "Invalid", 2)
    assert not reported(status, "Ready", FALSE, "Invalid", 3)
    assert not reported(status, "Ready", FALSE, "Other", 2)
    assert not reported(status, "Ready", TRUE, "Invalid", 2)
    assert not reported({}, "Ready", FALSE, "Invalid", 0)


def test_a_condition_is_current_unless_it_says_it_describes_an_older_generation() -> None:
    # As kubectl wait reads it: the condition's own observedGeneration, else its status's; one
    # that says nothing is taken at its word, an older one is stale.
    assert current({"type": "Ready", "observedGeneration": 3}, 3)
    assert current({"type": "Ready", "observedGeneration": 4}, 3)
    assert not current({"type": "Ready", "observedGeneration": 2}, 3)
    assert current({"type": "Ready"}, 3)
    assert not current({"type": "Ready"}, 3, {"observedGeneration": 2})
    assert current({"type": "Ready", "observedGeneration": 3}, 3, {"observedGeneration": 2})
    assert current({"type": "Ready", "observedGeneration": 2}, None), "an object without a generation"
    assert not current(None, 3)
    assert current(ready(generation=3), 3)
    assert not current(ObservedCondition(type="Ready", observed_generation=2), 3)
    assert current(ObservedCondition(type="Ready"), 3)


def test_reported_reads_the_conditions_own_generation_first() -> None:
    status = {
        "observedGeneration": 3,
        "conditions": [{"type": "Ready", "status": FALSE, "reason": "Invalid", "observedGeneration": 2}],
    }
    assert not reported(status, "Ready", FALSE, "Invalid", 3)


def test_status_differs_on_a_field_or_a_condition_but_not_on_a_transition_time() -> None:
    ready = {"type": "Ready", "status": TRUE, "reason": "Valid", "lastTransitionTime": "t1"}
    previous = {"observedGeneration": 1, "count": 2, "conditions": [ready]}
    moved = {**ready, "lastTransitionTime": "t2"}
    assert not status_differs(previous, {**previous, "conditions": [moved]}, ("observedGeneration", "count"))
    assert not status_differs(previous, {**previous, "other": 1}, ("observedGeneration", "count"))
    assert status_differs(previous, {**previous, "count": 3}, ("observedGeneration", "count"))
    assert status_differs(previous, {**previous, "conditions": [{**ready, "reason": "X"}]}, ())
    assert status_differs(previous, {**previous, "conditions": []}, ())


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-03-01T12:00:00Z", datetime(2026, 3, 1, 12, tzinfo=UTC)),
        ("2026-03-01T14:00:00+02:00", datetime(2026, 3, 1, 12, tzinfo=UTC)),
        ("2026-03-01T11:30:00.123456-00:30", datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)),
    ],
)
def test_parse_time_returns_utc(text: str, moment: datetime) -> None:
    parsed = parse_time(text)
    assert (parsed, parsed.utcoffset()) == (moment, timedelta(0))
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2026-03-01T12:00:00", "without a zone"),
        ("2026-03-01", "without a zone"),
        ("garbage", "Invalid isoformat"),
        ("", "Invalid isoformat"),
        ("0001-01-01T00:00:00+01:00", "out of range"),
        ("9999-12-31T23:59:59-01:00", "out of range"),
    ],
)
def test_parse_time_refuses_a_time_without_a_zone_or_out_of_range(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_time(text)


@pytest.mark.parametrize(
    "value",
    [None, "", 42, "garbage", "2026-03-01T12:00:00", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"],
)
def test_parse_time_or_none_reads_unset_unreadable_and_go_zero_time_as_none(value: object) -> None:
    assert parse_time_or_none(value) is None


def test_parse_time_or_none_reads_a_time_as_parse_time_does() -> None:
    moment = parse_time_or_none("2026-03-01T13:00:00+01:00")
    assert moment == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert moment is not None
    assert moment.tzinfo is UTC


END = parse_time("9999-12-31T23:59:59Z")


def test_time_after_adds_a_timedelta_or_seconds() -> None:
    start = parse_time(NOW)
    assert time_after(start, timedelta(minutes=5)) == start + timedelta(minutes=5)
    assert time_after(start, 1.5) == start + timedelta(seconds=1.5)
    assert time_after(start, -60) == start - timedelta(minutes=1)


@pytest.mark.parametrize(
    ("moment", "duration"),
    [
        (END, 1),  # a timeAdded or lastTransitionTime in year 9999, plus any duration
        (END, timedelta(hours=1)),
        (parse_time(NOW), 2**63 - 1),  # a tolerationSeconds at the int64 limit: too large for a timedelta
        (parse_time(NOW), timedelta(days=999_999_999)),
        (parse_time(NOW), float("inf")),  # a duration written with 400 digits reads as infinity
    ],
)
def test_time_after_saturates_at_the_last_moment_a_datetime_holds(moment: datetime, duration: object) -> None:
    assert isinstance(duration, (timedelta, int, float))
    assert time_after(moment, duration) == LATEST_TIME
    assert LATEST_TIME.tzinfo is UTC


def test_time_after_saturates_before_year_one_too() -> None:
    assert time_after(parse_time("0001-01-01T00:00:01Z"), -2) == datetime.min.replace(tzinfo=UTC)
