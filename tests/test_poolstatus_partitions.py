"""partitionSummary: spec vectors 24-51 and the D10 vector of Q2 (sections 19.3-19.5)."""

from __future__ import annotations

from typing import Any

import pytest
from poolstatus_builders import (
    A,
    claims_on,
    counts,
    device,
    fixture_g_slices,
    only_pool,
    partitions,
    plain_devices,
    request_spec,
    resource_slice,
)

from operators.poolstatus.models import ResourceSlice

P = "gpu.example.com/profile"
S = "gpu.example.com/shape"


def gpu(
    name: str, profile: str | int | None, memory: str = "40Gi", counter_set: str = "gpu-0", **extra: Any
) -> dict[str, Any]:
    attributes = {} if profile is None else {"profile": profile}
    return device(name, attributes=attributes, consumes=[(counter_set, {"memory": memory})], **extra)


# 19.3 Fixture G -----------------------------------------------------------------------


def test_v24_nothing_in_use() -> None:
    pool = only_pool(fixture_g_slices())
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]
    assert counts(pool) == (3, 0, 3, 0)
    assert pool["resourceSliceCount"] == 2


def test_v27_allocatable_clamped_by_device_count() -> None:
    devices = [gpu(f"full-{i}", "Full", "80Gi") for i in range(3)]
    assert partitions(only_pool(fixture_g_slices(devices=devices, counters="800Gi"))) == [(A, "Full", 3, 3)]
    pool = only_pool(fixture_g_slices(counters="800Gi"))
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]


@pytest.mark.parametrize("profile", [None, 2])
def test_v28_missing_partition_type(profile: int | None) -> None:
    devices = [gpu("full-0", "Full", "80Gi"), gpu("half-0", "Half"), gpu("half-1", profile)]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert pool["validationError"] == (
        'PartitionTypeMissing: device "half-1" in pool gpu.example.com/pool-1 '
        'does not carry partition type attribute "gpu.example.com/profile"'
    )
    assert "partitionSummary" not in pool
    assert pool["totalDevices"] == 3


def test_v29_cost_mismatch() -> None:
    devices = [gpu("full-0", "Full", "80Gi"), gpu("half-0", "Half"), gpu("half-1", "Half", "50Gi")]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert pool["validationError"] == (
        'PartitionCostMismatch: devices of partition type "Half" in pool gpu.example.com/pool-1 '
        "consume different counters"
    )
    assert "partitionSummary" not in pool
    variant = only_pool(
        fixture_g_slices(devices=[gpu("full-0", "Full", "80Gi"), gpu("full-1", "Full", "60Gi")])
    )
    assert '"Full"' in variant["validationError"]


def test_v30_second_counter_limits() -> None:
    two_counters = [("mem", {"memory": "80Gi"}), ("cores", {"sm": "8"})]
    devices = [device(f"full-{i}", attributes={"profile": "Full"}, consumes=two_counters) for i in range(2)]
    slices = [
        resource_slice(
            "c", slice_count=2, shared_counters={"mem": {"memory": "160Gi"}, "cores": {"sm": "8"}}
        ),
        resource_slice("d", devices, slice_count=2, partition_attribute=A),
    ]
    assert partitions(only_pool(slices)) == [(A, "Full", 2, 1)]


def test_v31_shareable_partition() -> None:
    devices = [gpu("full-0", "Full", "80Gi", shareable=True, capacity={"memory": "80Gi"})]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert partitions(pool) == [(A, "Full", 1, 1)]
    assert pool["shareableSummary"] == {
        "fullyAvailableDevices": 1,
        "partiallyAvailableDevices": 0,
        "capacity": [{"name": "memory", "total": "80Gi", "consumed": "0", "available": "80Gi"}],
    }


def test_v32_qualified_attribute_keys() -> None:
    devices = [
        device("full-0", attributes={P: "Full"}, consumes=[("gpu-0", {"memory": "80Gi"})]),
        device("half-0", attributes={P: "Half"}, consumes=[("gpu-0", {"memory": "40Gi"})]),
        device("half-1", attributes={P: "Half"}, consumes=[("gpu-0", {"memory": "40Gi"})]),
    ]
    assert partitions(only_pool(fixture_g_slices(devices=devices))) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]


def test_v33_no_attribute_anywhere() -> None:
    pool = only_pool(fixture_g_slices(partition_attribute=None))
    assert "partitionSummary" not in pool
    assert "validationError" not in pool


def test_v34_shared_half_subtracted_once() -> None:
    devices = [gpu("full-0", "Full", "80Gi"), gpu("half-0", "Half", shareable=True), gpu("half-1", "Half")]
    pool = only_pool(fixture_g_slices(devices=devices), claims_on("half-0", "half-0", "half-0"))
    assert partitions(pool) == [(A, "Full", 1, 0), (A, "Half", 2, 1)]
    assert pool["allocatedDevices"] == 1
    assert pool["shareableSummary"] == {"fullyAvailableDevices": 0, "partiallyAvailableDevices": 1}


def test_q2_tainted_device_is_not_allocatable() -> None:
    devices = [
        gpu("full-0", "Full", "80Gi"),
        gpu("half-0", "Half"),
        gpu("half-1", "Half", taints=["NoSchedule"]),
    ]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 1)]
    assert counts(pool) == (3, 0, 2, 1)


# 19.4 Fixture R: attribute resolution --------------------------------------------------


def r_device(name: str, *, shape: bool = True) -> dict[str, Any]:
    attributes = {"profile": "Full", "shape": "Small"} if shape else {"profile": "Full"}
    return device(name, attributes=attributes, consumes=[("gpu-0", {"memory": "10Gi"})])


def fixture_r(*device_slices: tuple[str, list[dict[str, Any]], str | None]) -> list[ResourceSlice]:
    count = len(device_slices) + 1
    slices = [resource_slice("counters", slice_count=count, shared_counters={"gpu-0": {"memory": "80Gi"}})]
    for name, devices, attribute in device_slices:
        slices.append(resource_slice(name, devices, slice_count=count, partition_attribute=attribute))
    return slices


def test_v35_slice_declaration_beats_default() -> None:
    pool = only_pool(fixture_r(("s0", [r_device("d0")], P)), spec=request_spec(default_attribute=S))
    assert partitions(pool) == [(P, "Full", 1, 1)]


def test_v36_default_when_slice_declares_nothing() -> None:
    pool = only_pool(fixture_r(("s0", [r_device("d0")], None)), spec=request_spec(default_attribute=S))
    assert partitions(pool) == [(S, "Small", 1, 1)]


def test_v37_default_applies_per_device() -> None:
    slices = fixture_r(("s0", [r_device("d0")], P), ("s1", [r_device("d1")], None))
    pool = only_pool(slices, spec=request_spec(default_attribute=S))
    assert partitions(pool) == [(P, "Full", 1, 1), (S, "Small", 1, 1)]


def test_v38_slices_declare_different_attributes() -> None:
    slices = fixture_r(("s0", [r_device("d0")], P), ("s1", [r_device("d1")], S))
    assert partitions(only_pool(slices)) == [(P, "Full", 1, 1), (S, "Small", 1, 1)]


def test_v39_no_declaration_no_default() -> None:
    pool = only_pool(fixture_r(("s0", [r_device("d0"), r_device("d1")], None)))
    assert "partitionSummary" not in pool
    assert "validationError" not in pool


def test_v40_default_only() -> None:
    slices = fixture_r(("s0", [r_device("d0"), r_device("d1")], None))
    assert partitions(only_pool(slices, spec=request_spec(default_attribute=S))) == [(S, "Small", 2, 2)]


def test_v41_default_on_plain_pool() -> None:
    pool = only_pool([resource_slice("s0", plain_devices(4))], spec=request_spec(default_attribute=P))
    assert "partitionSummary" not in pool
    assert "validationError" not in pool
    assert counts(pool) == (4, 0, 4, 0)


def test_v42_plain_device_next_to_partitions() -> None:
    devices = [gpu("full-0", "Full", "80Gi"), gpu("half-0", "Half"), gpu("half-1", "Half"), device("plain-0")]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]
    assert counts(pool) == (4, 0, 4, 0)


def test_v43_default_on_fixture_g() -> None:
    pool = only_pool(fixture_g_slices(partition_attribute=None), spec=request_spec(default_attribute=A))
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]


@pytest.mark.parametrize(
    ("attributes", "attribute", "expected"),
    [
        ({"profile": "Full"}, P, "Full"),
        ({"profile": 2}, P, None),
        ({}, P, None),
        ({"x": "Full"}, "other.com/x", None),
        ({"profile": "Half", P: "Full"}, P, "Full"),
        ({"profile": "Half", P: 2}, P, None),
        ({"profile": "Half", P: ""}, P, None),
        ({"profile": ""}, P, None),
        ({"other.com/x": "Full"}, "other.com/x", "Full"),
    ],
)
def test_v44_value_lookup(attributes: dict[str, str | int], attribute: str, expected: str | None) -> None:
    devices = [device("d0", attributes=attributes, consumes=[("gpu-0", {"memory": "10Gi"})])]
    pool = only_pool(fixture_r(("s0", devices, attribute)))
    if expected is None:
        assert pool["validationError"] == (
            'PartitionTypeMissing: device "d0" in pool gpu.example.com/pool-1 '
            f'does not carry partition type attribute "{attribute}"'
        )
    else:
        assert partitions(pool) == [(attribute, expected, 1, 1)]


def test_full_key_with_a_non_string_value_hides_the_bare_key_from_the_default() -> None:
    attributes: dict[str, str | int] = {S: 2, "shape": "Small"}
    devices = [device("d0", attributes=attributes, consumes=[("gpu-0", {"memory": "10Gi"})])]
    pool = only_pool(fixture_r(("s0", devices, None)), spec=request_spec(default_attribute=S))
    assert pool["validationError"] == (
        'PartitionTypeMissing: device "d0" in pool gpu.example.com/pool-1 '
        'does not carry partition type attribute "gpu.example.com/shape"'
    )


def test_v45_declaration_on_counters_slice_only() -> None:
    g = fixture_g_slices(partition_attribute=None)
    counters_slice = g[0].model_copy(
        update={"spec": g[0].spec.model_copy(update={"partition_type_attribute": A})}
    )
    pool = only_pool([counters_slice, g[1]])
    assert "partitionSummary" not in pool
    assert "validationError" not in pool


def test_v46_default_reaches_device_lacking_it() -> None:
    slices = fixture_r(("s0", [r_device("d0")], P), ("s1", [r_device("d1", shape=False)], None))
    pool = only_pool(slices, spec=request_spec(default_attribute=S))
    assert pool["validationError"] == (
        'PartitionTypeMissing: device "d1" in pool gpu.example.com/pool-1 '
        'does not carry partition type attribute "gpu.example.com/shape"'
    )


# 19.5 Fixture M: one counter set per GPU, cost by value ---------------------------------


def fixture_m() -> list[ResourceSlice]:
    devices = [
        gpu("full-0", "Full", "80Gi", "gpu-0"),
        gpu("full-1", "Full", "80Gi", "gpu-1"),
        gpu("half-0a", "Half", "40Gi", "gpu-0"),
        gpu("half-0b", "Half", "40Gi", "gpu-0"),
        gpu("half-1a", "Half", "40Gi", "gpu-1"),
        gpu("half-1b", "Half", "40Gi", "gpu-1"),
    ]
    shared = {"gpu-0": {"memory": "80Gi"}, "gpu-1": {"memory": "80Gi"}}
    return [
        resource_slice("counters", slice_count=2, shared_counters=shared),
        resource_slice("devices", devices, slice_count=2, partition_attribute=A),
    ]


def test_v47_set_per_gpu() -> None:
    pool = only_pool(fixture_m())
    assert partitions(pool) == [(A, "Full", 2, 2), (A, "Half", 4, 4)]
    assert counts(pool)[:3] == (6, 0, 6)


@pytest.mark.parametrize(
    ("slices", "in_use", "expected", "in_use_counts"),
    [
        pytest.param(
            fixture_g_slices(), "full-0", [(A, "Full", 1, 0), (A, "Half", 2, 0)], (3, 1, 2), id="v25"
        ),
        pytest.param(
            fixture_g_slices(), "half-0", [(A, "Full", 1, 0), (A, "Half", 2, 1)], (3, 1, 2), id="v26"
        ),
        pytest.param(fixture_m(), "full-0", [(A, "Full", 2, 1), (A, "Half", 4, 2)], (6, 1, 5), id="v48"),
        pytest.param(fixture_m(), "half-0a", [(A, "Full", 2, 1), (A, "Half", 4, 3)], (6, 1, 5), id="v49"),
    ],
)
def test_one_device_in_use(
    slices: list[ResourceSlice],
    in_use: str,
    expected: list[tuple[str, str, int, int]],
    in_use_counts: tuple[int, int, int],
) -> None:
    """Vectors 25 and 26 (fixture G) and 48 and 49 (fixture M): one full or half partition in use."""
    pool = only_pool(slices, claims_on(in_use))
    assert partitions(pool) == expected
    assert counts(pool)[:3] == in_use_counts


def test_v50_cost_compared_by_value() -> None:
    devices = [gpu("full-0", "Full", "80Gi"), gpu("half-0", "Half"), gpu("half-1", "Half", "42949672960")]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert "validationError" not in pool
    assert partitions(pool) == [(A, "Full", 1, 1), (A, "Half", 2, 2)]


def test_v51_multi_entry_costs() -> None:
    shared = {
        "mem-0": {"memory": "80Gi"},
        "cores-0": {"sm": "8"},
        "mem-1": {"memory": "80Gi"},
        "cores-1": {"sm": "8"},
    }
    devices = [
        device(
            "full-0",
            attributes={"profile": "Full"},
            consumes=[("mem-0", {"memory": "80Gi"}), ("cores-0", {"sm": "8"})],
        ),
        device(
            "full-1",
            attributes={"profile": "Full"},
            consumes=[("mem-1", {"memory": "80Gi"}), ("cores-1", {"sm": "8"})],
        ),
    ]
    slices = [
        resource_slice("counters", slice_count=2, shared_counters=shared),
        resource_slice("devices", devices, slice_count=2, partition_attribute=A),
    ]
    assert partitions(only_pool(slices)) == [(A, "Full", 2, 2)]

    merged = device(
        "full-2", attributes={"profile": "Full"}, consumes=[("mem-0", {"memory": "80Gi", "sm": "8"})]
    )
    slices[1] = resource_slice("devices", [*devices, merged], slice_count=2, partition_attribute=A)
    pool = only_pool(slices)
    assert pool["validationError"].startswith('PartitionCostMismatch: devices of partition type "Full"')


def test_over_cap_partition_types() -> None:
    devices = [gpu(f"d{i:02}", f"T{i:02}", "1Gi") for i in range(33)]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert pool["validationError"] == (
        "PartitionSummaryOverCap: pool gpu.example.com/pool-1 has 33 partition types, "
        "exceeding the maximum of 32"
    )
    assert "partitionSummary" not in pool


def test_exactly_32_partition_types_fit() -> None:
    devices = [gpu(f"d{i:02}", f"T{i:02}", "1Gi") for i in range(32)]
    assert len(partitions(only_pool(fixture_g_slices(devices=devices)))) == 32


# Counters a driver publishes far beyond exact arithmetic ---------------------------------------

HUGE = "1e2147483647"
"""A counter value the API accepts (any parsed quantity is valid); Go expands ``10**2147483647``."""

COUNTER_OUT_OF_RANGE = (
    'PartitionCounterOutOfRange: counter "memory" of counter set "gpu-0" in pool gpu.example.com/pool-1 '
    "cannot be computed exactly: its quantities are more than 4096 digits apart"
)


def halves(memory: str, count: int = 2) -> list[dict[str, Any]]:
    return [gpu(f"half-{i}", "Half", memory) for i in range(count)]


@pytest.mark.parametrize("counters", [HUGE, "1e5000", "1e40000", "1e80000"])
def test_a_counter_beyond_exact_digits_is_a_validation_error(counters: str) -> None:
    # Returning at all is the time budget: the old code expanded the power of ten one digit at a
    # time (1e80000 took seconds, HUGE never ended) or, past 4300 digits, raised ValueError.
    pool = only_pool(fixture_g_slices(devices=halves("1"), counters=counters))
    assert pool["validationError"] == COUNTER_OUT_OF_RANGE
    assert "partitionSummary" not in pool
    assert counts(pool) == (2, 0, 2, 0)


def test_an_allocated_device_charging_a_huge_counter_is_a_validation_error() -> None:
    pool = only_pool(fixture_g_slices(devices=halves("1"), counters=HUGE), claims_on("half-0"))
    assert pool["validationError"] == COUNTER_OUT_OF_RANGE
    assert counts(pool) == (2, 1, 1, 0)


def test_huge_counters_that_need_no_arithmetic_are_compared_exactly() -> None:
    # Nothing is subtracted: the device does not fit, or consumes as much as there is.
    assert partitions(only_pool(fixture_g_slices(devices=halves(HUGE), counters="1"))) == [(A, "Half", 2, 0)]
    pool = only_pool(fixture_g_slices(devices=halves(HUGE, count=1), counters=HUGE))
    assert partitions(pool) == [(A, "Half", 1, 1)]


def test_counters_within_exact_digits_stay_exact() -> None:
    pool = only_pool(fixture_g_slices(devices=halves("1", count=3), counters="1e4000"))
    assert partitions(pool) == [(A, "Half", 3, 3)]
    pool = only_pool(fixture_g_slices(devices=halves("1e4000", count=3), counters="2e4000"))
    assert partitions(pool) == [(A, "Half", 3, 2)]
