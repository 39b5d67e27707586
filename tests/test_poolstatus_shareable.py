"""shareableSummary: spec vectors 60-69 (section 19.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from poolstatus_builders import NET, claim, device, only_pool, request_spec, resource_slice, result

from operators.poolstatus.models import ResourceClaim


def nic(name: str, **capacity: str) -> dict[str, Any]:
    return device(name, shareable=True, capacity={k.replace("_", "-"): v for k, v in capacity.items()})


def net_pool(devices: Sequence[dict[str, Any]], claims: Sequence[ResourceClaim] = ()) -> dict[str, Any]:
    slices = [resource_slice("s0", devices, driver=NET)]
    return only_pool(slices, claims, spec=request_spec(NET))


def partitioned_net_pool(devices: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The pool of one slice whose devices share the counter set ``set`` (``c``: 2) and name their
    partition type in the attribute ``profile``."""
    slices = [
        resource_slice(
            "s0",
            devices,
            driver=NET,
            partition_attribute=f"{NET}/profile",
            shared_counters={"set": {"c": "2"}},
        )
    ]
    return only_pool(slices, spec=request_spec(NET))


def uses(device_name: str, consumed: Mapping[str, str], index: int = 0) -> ResourceClaim:
    return claim(f"{device_name}-claim-{index}", result(device_name, driver=NET, consumed=consumed))


def summary(fully: int, partial: int, *capacity: tuple[str, str, str, str]) -> dict[str, Any]:
    expected: dict[str, Any] = {"fullyAvailableDevices": fully, "partiallyAvailableDevices": partial}
    if capacity:
        expected["capacity"] = [
            {"name": name, "total": total, "consumed": consumed, "available": available}
            for name, total, consumed, available in capacity
        ]
    return expected


def test_v60_one_share_consumed() -> None:
    devices = [nic("shareable-0", memory="40Gi"), nic("shareable-1", memory="40Gi"), device("plain-0")]
    pool = net_pool(devices, [uses("shareable-0", {"memory": "10Gi"})])
    assert (pool["totalDevices"], pool["allocatedDevices"], pool["availableDevices"]) == (3, 1, 2)
    assert pool["shareableSummary"] == summary(1, 1, ("memory", "80Gi", "10Gi", "70Gi"))


def test_v61_two_capacities_sorted() -> None:
    devices = [
        nic("shareable-0", memory="40Gi", cores="4"),
        nic("shareable-1", memory="40Gi", cores="4"),
        device("plain-0"),
    ]
    pool = net_pool(devices, [uses("shareable-0", {"memory": "10Gi", "cores": "1"})])
    assert pool["shareableSummary"] == summary(
        1, 1, ("cores", "8", "1", "7"), ("memory", "80Gi", "10Gi", "70Gi")
    )


def test_v62_no_shareable_device() -> None:
    assert "shareableSummary" not in net_pool([device("plain-0")])


def test_v63_several_shares() -> None:
    devices = [nic(f"nic-{i}", bandwidth="10Gi") for i in range(3)]
    claims = [
        uses("nic-0", {"bandwidth": "5Gi"}, 0),
        uses("nic-0", {"bandwidth": "2Gi"}, 1),
        uses("nic-1", {"bandwidth": "2Gi"}),
    ]
    pool = net_pool(devices, claims)
    assert pool["shareableSummary"] == summary(1, 2, ("bandwidth", "30Gi", "9Gi", "21Gi"))
    assert pool["allocatedDevices"] == 2


def test_v64a_different_capacities() -> None:
    pool = net_pool([nic("nic-a", bandwidth="10Gi"), nic("nic-b", packets_per_sec="1M")])
    assert pool["shareableSummary"] == summary(
        2, 0, ("bandwidth", "10Gi", "0", "10Gi"), ("packets-per-sec", "1M", "0", "1M")
    )


def test_v64b_single_device_share() -> None:
    pool = net_pool([nic("gpu", memory="40Gi")], [uses("gpu", {"memory": "10Gi"})])
    assert pool["shareableSummary"] == summary(0, 1, ("memory", "40Gi", "10Gi", "30Gi"))
    assert pool["allocatedDevices"] == 1


def test_v64c_two_free_devices() -> None:
    pool = net_pool([nic("g0", memory="40Gi"), nic("g1", memory="40Gi")])
    assert pool["shareableSummary"] == summary(2, 0, ("memory", "80Gi", "0", "80Gi"))


def test_v65_exhausted_device_is_not_partial() -> None:
    devices = [nic("nic-0", bandwidth="10Gi"), nic("nic-1", bandwidth="10Gi")]
    claims = [uses("nic-0", {"bandwidth": "6Gi"}, 0), uses("nic-0", {"bandwidth": "4Gi"}, 1)]
    assert net_pool(devices, claims)["shareableSummary"] == summary(
        1, 0, ("bandwidth", "20Gi", "10Gi", "10Gi")
    )


def test_v66_partial_until_every_capacity_is_used() -> None:
    pool = net_pool(
        [nic("nic-0", bandwidth="10Gi", queues="4")], [uses("nic-0", {"bandwidth": "10Gi", "queues": "2"})]
    )
    assert pool["shareableSummary"] == summary(
        0, 1, ("bandwidth", "10Gi", "10Gi", "0"), ("queues", "4", "2", "2")
    )


def test_v67_overconsumed_capacity() -> None:
    claims = [uses("nic-0", {"bandwidth": "6Gi"}, 0), uses("nic-0", {"bandwidth": "6Gi"}, 1)]
    pool = net_pool([nic("nic-0", bandwidth="10Gi")], claims)
    assert pool["shareableSummary"] == summary(0, 0, ("bandwidth", "10Gi", "12Gi", "0"))


def test_v68_unpublished_device_consumption_ignored() -> None:
    claims = [uses("nic-0", {"bandwidth": "2Gi"}), uses("nic-9", {"bandwidth": "5Gi"})]
    pool = net_pool([nic("nic-0", bandwidth="10Gi")], claims)
    assert pool["allocatedDevices"] == 1
    assert pool["shareableSummary"] == summary(0, 1, ("bandwidth", "10Gi", "2Gi", "8Gi"))


def test_v69_qualified_consumption_key() -> None:
    pool = net_pool([nic("nic-0", bandwidth="10G")], [uses("nic-0", {"net.example.com/bandwidth": "1G"})])
    assert pool["shareableSummary"] == summary(0, 1, ("bandwidth", "10G", "1G", "9G"))


def test_v69_zero_share_still_holds_the_device() -> None:
    pool = net_pool([nic("nic-0", bandwidth="10Gi")], [uses("nic-0", {"bandwidth": "0"})])
    assert pool["shareableSummary"] == summary(0, 1, ("bandwidth", "10Gi", "0", "10Gi"))


def test_device_without_capacity_is_never_exhausted() -> None:
    pool = net_pool([device("nic-0", shareable=True)], [uses("nic-0", {})])
    assert pool["shareableSummary"] == summary(0, 1)


def test_foreign_domain_key_does_not_match_bare_name() -> None:
    pool = net_pool([nic("nic-0", bandwidth="10Gi")], [uses("nic-0", {"other.example.com/bandwidth": "1Gi"})])
    assert pool["shareableSummary"] == summary(0, 1, ("bandwidth", "10Gi", "0", "10Gi"))


def test_name_is_first_spelling_in_canonical_order() -> None:
    devices = [
        nic("nic-b", bandwidth="10Gi"),
        device("nic-a", shareable=True, capacity={f"{NET}/bandwidth": "5Gi"}),
    ]
    pool = net_pool(devices)
    assert pool["shareableSummary"]["capacity"] == [
        {"name": f"{NET}/bandwidth", "total": "15Gi", "consumed": "0", "available": "15Gi"}
    ]


@pytest.mark.parametrize(("keys", "error"), [(32, False), (33, True)])
def test_over_cap_capacity_keys(keys: int, error: bool) -> None:
    capacity = {f"c{i:02}": "1" for i in range(keys)}
    pool = net_pool([device("nic-0", shareable=True, capacity=capacity)])
    if error:
        assert pool["validationError"] == (
            "ShareableSummaryOverCap: pool net.example.com/pool-1 has 33 shareable capacity keys, "
            "exceeding the maximum of 32"
        )
        assert "shareableSummary" not in pool
    else:
        assert len(pool["shareableSummary"]["capacity"]) == 32


def test_partition_error_hides_partition_summary_but_not_shareable() -> None:
    devices = [
        device("d0", attributes={"profile": "Full"}, consumes=[("set", {"c": "1"})], shareable=True),
        device("d1", consumes=[("set", {"c": "1"})]),
    ]
    pool = partitioned_net_pool(devices)
    assert pool["validationError"].startswith('PartitionTypeMissing: device "d1"')
    assert "partitionSummary" not in pool
    assert pool["shareableSummary"] == summary(1, 0)


def test_shareable_error_hides_partition_summary() -> None:
    capacity = {f"c{i:02}": "1" for i in range(33)}
    devices = [
        device(
            "d0",
            attributes={"profile": "Full"},
            consumes=[("set", {"c": "1"})],
            shareable=True,
            capacity=capacity,
        )
    ]
    pool = partitioned_net_pool(devices)
    assert pool["validationError"].startswith("ShareableSummaryOverCap:")
    assert "partitionSummary" not in pool
    assert "shareableSummary" not in pool


# Capacities a driver publishes far beyond exact arithmetic --------------------------------------

HUGE = "1e2147483647"
"""A capacity the API accepts (any parsed quantity is valid); Go expands ``10**2147483647``."""

CAPACITY_OUT_OF_RANGE = (
    'ShareableCapacityOutOfRange: capacity "mem" in pool net.example.com/pool-1 cannot be summed '
    "exactly: its quantities are more than 4096 digits apart"
)


def test_a_huge_capacity_alone_is_written_as_go_writes_it() -> None:
    pool = net_pool([nic("nic-0", mem=HUGE)])
    assert pool["shareableSummary"] == summary(1, 0, ("mem", "10e2147483646", "0", "10e2147483646"))


def test_a_capacity_of_more_than_4300_digits_is_written_exactly() -> None:
    digits = "1" + "0" * 4999 + "1"
    pool = net_pool([nic("nic-0", mem=digits)], [uses("nic-0", {"mem": digits})])
    assert pool["shareableSummary"] == summary(0, 0, ("mem", digits, digits, "0"))


@pytest.mark.parametrize(
    ("devices", "claims"),
    [
        ([nic("nic-0", mem=HUGE)], [uses("nic-0", {"mem": "1"})]),
        ([nic("nic-0", mem=HUGE), nic("nic-1", mem="1")], []),
        ([nic("nic-0", mem="1e5000"), nic("nic-1", mem="1")], []),
        ([nic("nic-0", mem="1e80000")], [uses("nic-0", {"mem": "1"})]),
        ([nic("nic-0", mem="2")], [uses("nic-0", {"mem": HUGE}, 0), uses("nic-0", {"mem": "1"}, 1)]),
    ],
    ids=["consumed", "summed", "5000-digits", "80000-digits", "consumption-summed"],
)
def test_a_capacity_sum_beyond_exact_digits_is_a_validation_error(
    devices: list[dict[str, Any]], claims: list[ResourceClaim]
) -> None:
    # Returning at all is the time budget: the old code expanded the power of ten one digit at a
    # time (1e80000 took seconds, HUGE never ended) or, past 4300 digits, raised ValueError.
    pool = net_pool(devices, claims)
    assert pool["validationError"] == CAPACITY_OUT_OF_RANGE
    assert "shareableSummary" not in pool
    assert pool["totalDevices"] == len(devices)


def test_consumption_of_a_name_the_device_lacks_is_never_summed() -> None:
    claims = [uses("nic-0", {"other": HUGE, "mem": "1"}, 0), uses("nic-0", {"other": "1"}, 1)]
    pool = net_pool([nic("nic-0", mem="2")], claims)
    assert pool["shareableSummary"] == summary(0, 1, ("mem", "2", "1", "1"))
