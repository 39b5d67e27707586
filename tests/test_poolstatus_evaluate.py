"""The evaluation entry point: grace period, limit, size guard and failures.

Spec vectors 9, 72-75, 78 (timing, with an injected clock), 80 and 82, plus the metric
figures :class:`Completed` carries.
"""

from __future__ import annotations

import json

import pytest
from poolstatus_builders import WRITTEN_AT, plain_devices, request_spec, resource_slice

from operators.poolstatus import messages
from operators.poolstatus.models import RequestSpec, ResourceSlice
from operators.poolstatus.status import (
    Completed,
    Deferred,
    Evaluation,
    compute_pools,
    decide,
    encoded_size,
    failed_status,
    grace_retry_delay,
)


def run(spec: RequestSpec, slices: list[ResourceSlice], elapsed: float, grace: float = 20.0) -> Evaluation:
    pools = compute_pools(spec, slices, (), ())
    return decide(spec, pools, now=1000.0 + elapsed, first_seen=1000.0, grace=grace, written_at=WRITTEN_AT)


HALF_POOL = [resource_slice("s0", plain_devices(2), slice_count=2)]
FULL_POOL = [*HALF_POOL, resource_slice("s1", plain_devices(2, start=2), slice_count=2)]


def test_v72_waits_then_completes_when_the_pool_fills() -> None:
    waiting = run(request_spec(), HALF_POOL, elapsed=0.0)
    assert waiting == Deferred(retry_after=0.5, incomplete_listed=1)
    done = run(request_spec(), FULL_POOL, elapsed=5.0)
    assert isinstance(done, Completed)
    [pool] = done.status["pools"]
    assert pool["totalDevices"] == 4
    assert "validationError" not in pool
    assert done.incomplete == 0


def test_v73_incomplete_pool_beyond_limit_does_not_wait() -> None:
    slices = [
        resource_slice("pool-1-s0", plain_devices(4)),
        resource_slice("pool-2-s0", plain_devices(4), pool="pool-2", slice_count=2),
    ]
    done = run(request_spec(limit=1), slices, elapsed=0.0)
    assert isinstance(done, Completed)
    assert done.status["poolCount"] == 2
    assert [p["poolName"] for p in done.status["pools"]] == ["pool-1"]
    assert done.status["conditions"][0]["message"] == "Calculated status for 1 pools"
    assert (done.pool_count, done.listed, done.incomplete) == (2, 1, 0)


def test_v73_listed_incomplete_pool_waits_for_the_deadline() -> None:
    slices = [
        resource_slice("a-s0", plain_devices(4), pool="pool-a", slice_count=2),
        resource_slice("b-s0", plain_devices(4), pool="pool-b"),
    ]
    assert isinstance(run(request_spec(limit=1), slices, elapsed=19.9), Deferred)
    done = run(request_spec(limit=1), slices, elapsed=20.0)
    assert isinstance(done, Completed)
    assert done.status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"
    assert done.validation_prefixes == ("PoolIncomplete:",)


def test_v74_v9_deadline_writes_incomplete_pool() -> None:
    done = run(request_spec(), HALF_POOL, elapsed=20.0)
    assert isinstance(done, Completed)
    assert done.result == "complete"
    assert done.status["pools"][0]["validationError"].startswith("PoolIncomplete:")
    assert done.status["conditions"][0]["lastTransitionTime"] == "2026-09-01T10:00:00Z"


def test_v75_zero_grace_writes_at_once() -> None:
    done = run(request_spec(), HALF_POOL, elapsed=0.0, grace=0.0)
    assert isinstance(done, Completed)
    assert done.incomplete == 1


def test_v78_reevaluation_schedule() -> None:
    times, elapsed = [], 0.0
    while (delay := grace_retry_delay(elapsed, 20.0)) is not None:
        elapsed += delay
        times.append(elapsed)
    assert times == [0.5, 1.5, 3.5, 7.5, 15.5, 20.0]


@pytest.mark.parametrize(
    ("elapsed", "delay"),
    [(0.0, 0.5), (0.2, 0.3), (0.5, 1.0), (3.0, 0.5), (15.5, 4.5), (19.99, pytest.approx(0.01)), (25.0, None)],
)
def test_grace_delay_is_anchored_to_first_evaluation(elapsed: float, delay: float | None) -> None:
    # Slice events may re-evaluate between checkpoints; the schedule does not shift.
    assert grace_retry_delay(elapsed, 20.0) == delay


def test_long_grace_keeps_eight_second_steps() -> None:
    assert grace_retry_delay(23.5, 60.0) == 8.0
    assert grace_retry_delay(55.5, 60.0) == 4.5


def test_v80_size_guard() -> None:
    slices = [resource_slice(f"p{i:02}-s0", plain_devices(4), pool=f"pool-{i:02}") for i in range(20)]
    unguarded = run(request_spec(), slices, elapsed=0.0)
    assert isinstance(unguarded, Completed)
    size = encoded_size(unguarded.status)
    assert size == len(json.dumps(unguarded.status, separators=(",", ":")).encode())

    pools = compute_pools(request_spec(), slices, (), ())
    done = decide(
        request_spec(), pools, now=0.0, first_seen=0.0, written_at=WRITTEN_AT, max_status_bytes=1000
    )
    assert isinstance(done, Completed)
    assert done.too_large
    assert done.result == "failed"
    assert done.status == {
        "poolCount": 0,
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "CalculationFailed",
                "message": f"Failed to write status: status is {size} bytes, above the limit of 1000 bytes; "
                "lower spec.limit or set spec.poolName",
                "lastTransitionTime": "2026-09-01T10:00:00Z",
            }
        ],
    }


@pytest.mark.parametrize(
    ("kind", "expected_prefix"),
    [
        ("ResourceSlices", "Failed to list ResourceSlices: "),
        ("ResourceClaims", "Failed to list ResourceClaims: "),
        ("DeviceTaintRules", "Failed to list DeviceTaintRules: "),
    ],
)
def test_v82_list_failure(kind: str, expected_prefix: str) -> None:
    error = f'{kind.lower()}.resource.k8s.io is forbidden: User "x" cannot list resource'
    status = failed_status(messages.list_failed_message(kind, error), WRITTEN_AT)
    assert status["poolCount"] == 0
    assert "pools" not in status
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Failed",
        "True",
        "CalculationFailed",
    )
    assert condition["message"] == expected_prefix + error


def test_failure_message_is_cut_to_1024_bytes() -> None:
    status = failed_status(messages.write_failed_message("x" + "é" * 1000), WRITTEN_AT)
    message = status["conditions"][0]["message"]
    assert len(message.encode()) <= 1024
    assert message.startswith("Failed to write status: xéé")
    assert len(message.encode()) == 1023  # one more two-byte character would not fit


def test_default_limit_is_100() -> None:
    slices = [resource_slice(f"p{i:03}", plain_devices(1), pool=f"pool-{i:03}") for i in range(101)]
    done = run(request_spec(), slices, elapsed=0.0)
    assert isinstance(done, Completed)
    assert done.status["poolCount"] == 101
    assert len(done.status["pools"]) == 100


def test_status_key_order_follows_the_api() -> None:
    done = run(request_spec(), FULL_POOL, elapsed=0.0)
    assert isinstance(done, Completed)
    assert list(done.status) == ["poolCount", "pools", "conditions"]
    assert list(done.status["pools"][0]) == [
        "driver",
        "poolName",
        "generation",
        "resourceSliceCount",
        "totalDevices",
        "allocatedDevices",
        "availableDevices",
        "unavailableDevices",
    ]
