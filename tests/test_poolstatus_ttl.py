"""TTL cleanup decisions: spec vector 16 (a-h) and section 13."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operators.core.conditions import format_time, parse_time
from operators.poolstatus.models import ResourcePoolStatusRequest
from operators.poolstatus.ttl import TtlDecision, ttl_action

T = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)


def request(
    *, created: datetime | None = T - timedelta(days=3), condition: tuple[str, datetime | None] | None = None
) -> ResourcePoolStatusRequest:
    body: dict[str, Any] = {"metadata": {"name": "r", "uid": "u"}, "spec": {"driver": "gpu.example.com"}}
    if created is not None:
        body["metadata"]["creationTimestamp"] = format_time(created)
    if condition is not None:
        type_, moment = condition
        entry = {"type": type_, "status": "True", "reason": "X", "message": ""}
        if moment is not None:
            entry["lastTransitionTime"] = format_time(moment)
        body["status"] = {"poolCount": 0, "conditions": [entry]}
    return ResourcePoolStatusRequest.model_validate(body)


def test_v16a_completed_two_hours_ago() -> None:
    assert ttl_action(request(condition=("Complete", T - timedelta(hours=2))), T).delete


def test_v16b_completed_now() -> None:
    decision = ttl_action(request(condition=("Complete", T)), T)
    assert decision == TtlDecision(delete=False, state="completed", requeue_after=3601.0)


def test_v16c_pending_created_now() -> None:
    decision = ttl_action(request(created=T), T)
    assert not decision.delete
    assert decision.state == "pending"


def test_v16d_pending_created_25_hours_ago() -> None:
    decision = ttl_action(request(created=T - timedelta(hours=25)), T)
    assert decision.delete
    assert decision.state == "pending"


@pytest.mark.parametrize(
    "req",
    [
        request(created=None),
        request(created=None, condition=("Other", T)),
        request(condition=("Complete", None)),
        request(condition=("Complete", datetime(1, 1, 1, tzinfo=UTC))),
    ],
)
def test_v16e_missing_or_zero_reference_never_expires(req: ResourcePoolStatusRequest) -> None:
    decision = ttl_action(req, T + timedelta(days=10000))
    assert not decision.delete
    assert decision.requeue_after is None


@pytest.mark.parametrize(
    ("age", "deleted"),
    [
        (timedelta(minutes=59), False),
        (timedelta(minutes=61), True),
        (timedelta(hours=1), False),
        (timedelta(hours=1, seconds=1), True),
    ],
)
def test_v16f_strict_comparison(age: timedelta, deleted: bool) -> None:
    assert ttl_action(request(condition=("Complete", T - age)), T).delete is deleted


def completed_at(stamp: str) -> ResourcePoolStatusRequest:
    """A done request whose ``lastTransitionTime`` is ``stamp`` as written, readable or not."""
    condition = {
        "type": "Complete",
        "status": "True",
        "reason": "X",
        "message": "",
        "lastTransitionTime": stamp,
    }
    return ResourcePoolStatusRequest.model_validate(
        {
            "metadata": {"name": "r", "uid": "u", "creationTimestamp": format_time(T - timedelta(days=3))},
            "spec": {"driver": "gpu.example.com"},
            "status": {"poolCount": 0, "conditions": [condition]},
        }
    )


@pytest.mark.parametrize("stamp", ["2026-09-01T10:00:00", "0001-01-01T00:00:00Z", "garbage"])
def test_an_unreadable_or_zero_transition_time_never_expires(stamp: str) -> None:
    decision = ttl_action(completed_at(stamp), T + timedelta(days=10000))
    assert (decision.delete, decision.requeue_after) == (False, None)


def test_a_transition_time_with_an_offset_counts_in_utc() -> None:
    # T - 1 h; a second past the TTL only when the offset is applied.
    assert ttl_action(completed_at("2026-09-01T13:00:00+02:00"), T + timedelta(seconds=1)).delete


def test_v16f_whole_seconds() -> None:
    req = request(condition=("Complete", T - timedelta(hours=1)))
    decision = ttl_action(req, T + timedelta(milliseconds=500))
    assert not decision.delete
    assert decision.requeue_after == 0.5


def test_v16g_status_without_known_condition_uses_creation_time() -> None:
    decision = ttl_action(request(created=T - timedelta(hours=2), condition=("Other", T)), T)
    assert decision.delete
    assert decision.state == "completed"


def test_v16h_failed_two_hours_ago() -> None:
    assert ttl_action(request(condition=("Failed", T - timedelta(hours=2))), T).delete


def test_first_terminal_condition_wins() -> None:
    req = ResourcePoolStatusRequest.model_validate(
        {
            "metadata": {"name": "r", "creationTimestamp": format_time(T - timedelta(days=3))},
            "spec": {"driver": "d"},
            "status": {
                "poolCount": 0,
                "conditions": [
                    {"type": "Failed", "lastTransitionTime": format_time(T - timedelta(minutes=10))},
                    {"type": "Complete", "lastTransitionTime": format_time(T - timedelta(hours=5))},
                ],
            },
        }
    )
    assert not ttl_action(req, T).delete


def test_custom_ttls() -> None:
    req = request(created=T - timedelta(minutes=11))
    assert ttl_action(req, T, pending_ttl=timedelta(minutes=10)).delete


YEAR_9999 = "9999-12-31T23:59:59Z"


@pytest.mark.parametrize(
    ("req", "state"),
    [
        (request(condition=("Complete", parse_time(YEAR_9999))), "completed"),
        (request(created=parse_time(YEAR_9999)), "pending"),
    ],
)
def test_a_reference_time_in_year_9999_is_kept_until_the_end_of_time(
    req: ResourcePoolStatusRequest, state: str
) -> None:
    # Its expiry, one TTL later, lies past what a datetime holds: it never comes, and is no error.
    assert format_time(parse_time(YEAR_9999)) == YEAR_9999
    decision = ttl_action(req, T)
    assert (decision.delete, decision.state) == (False, state)
    assert decision.requeue_after is not None
    assert decision.requeue_after > (parse_time(YEAR_9999) - T).total_seconds()
