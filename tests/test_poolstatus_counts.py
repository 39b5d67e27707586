"""Pools and device counts: spec vectors 1-15, 17-23 (sections 19.1 and 19.2)."""

from __future__ import annotations

from typing import Any

import pytest
from poolstatus_builders import (
    A,
    D,
    claim,
    claims_on,
    counts,
    device,
    final_status,
    only_pool,
    plain_devices,
    request_spec,
    resource_slice,
    result,
    taint_rule,
)

from operators.poolstatus.models import DeviceTaintRule, ResourceClaim, ResourceSlice

POOL_1 = [resource_slice("pool-1-s0", plain_devices(4))]


def test_v1_single_pool_no_claims() -> None:
    status = final_status(request_spec(), POOL_1)
    assert status["poolCount"] == 1
    assert status["pools"] == [
        {
            "driver": D,
            "poolName": "pool-1",
            "generation": 1,
            "resourceSliceCount": 1,
            "totalDevices": 4,
            "allocatedDevices": 0,
            "availableDevices": 4,
            "unavailableDevices": 0,
        }
    ]
    [condition] = status["conditions"]
    assert condition == {
        "type": "Complete",
        "status": "True",
        "reason": "CalculationComplete",
        "message": "Calculated status for 1 pools",
        "lastTransitionTime": "2026-09-01T10:00:00Z",
    }


def test_v2_claims_count_as_allocated() -> None:
    assert counts(only_pool(POOL_1, claims_on("device-0", "device-1"))) == (4, 2, 2, 0)


def two_pools() -> list[ResourceSlice]:
    return [
        resource_slice("pool-1-s0", plain_devices(4)),
        resource_slice("pool-2-s0", plain_devices(8), pool="pool-2"),
    ]


def test_v3_pools_sorted_by_name() -> None:
    status = final_status(request_spec(), list(reversed(two_pools())))
    assert status["poolCount"] == 2
    assert [(p["poolName"], p["totalDevices"]) for p in status["pools"]] == [("pool-1", 4), ("pool-2", 8)]
    assert status["conditions"][0]["message"] == "Calculated status for 2 pools"


def test_v4a_other_driver_ignored() -> None:
    other = resource_slice("other-s0", plain_devices(4), driver="other.example.com")
    pool = only_pool([*POOL_1, other])
    assert pool["totalDevices"] == 4


def test_v4b_pool_name_filter() -> None:
    status = final_status(request_spec(pool_name="pool-1"), two_pools())
    assert status["poolCount"] == 1
    assert [p["poolName"] for p in status["pools"]] == ["pool-1"]


def test_driver_match_is_case_sensitive() -> None:
    status = final_status(request_spec("GPU.example.com"), POOL_1)
    assert status["poolCount"] == 0


def test_v5_two_slices() -> None:
    slices = [
        resource_slice("s0", plain_devices(4), slice_count=2),
        resource_slice("s1", plain_devices(4, start=4), slice_count=2),
    ]
    pool = only_pool(slices)
    assert pool["resourceSliceCount"] == 2
    assert counts(pool) == (8, 0, 8, 0)


def test_v6_limit_truncates_after_sorting() -> None:
    status = final_status(request_spec(limit=1), two_pools())
    assert status["poolCount"] == 2
    assert [p["poolName"] for p in status["pools"]] == ["pool-1"]
    assert status["conditions"][0]["message"] == "Calculated status for 1 pools"


def test_v7_no_match() -> None:
    status = final_status(request_spec("absent.example.com"), POOL_1)
    assert status["poolCount"] == 0
    assert "pools" not in status
    assert status["conditions"][0]["message"] == "Calculated status for 0 pools"


def test_v8_newest_generation_only() -> None:
    slices = [
        resource_slice("a", plain_devices(8), generation=1),
        resource_slice("b", plain_devices(4), generation=2),
        resource_slice("c", plain_devices(4, start=4), generation=2),
    ]
    pool = only_pool(slices)
    assert pool["generation"] == 2
    assert pool["resourceSliceCount"] == 2
    assert pool["totalDevices"] == 8


def test_v9_incomplete_pool_after_deadline() -> None:
    slices = [resource_slice(f"s{i}", plain_devices(1, start=i), slice_count=5) for i in range(3)]
    status = final_status(request_spec(), slices)
    assert status["pools"] == [
        {
            "driver": D,
            "poolName": "pool-1",
            "generation": 1,
            "validationError": "PoolIncomplete: pool gpu.example.com/pool-1 is incomplete: "
            "observed 3/5 slices at generation 1",
        }
    ]
    assert status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"


def test_v10_complete_and_incomplete_pools() -> None:
    slices = [
        resource_slice("pool-1-s0", plain_devices(4)),
        resource_slice("pool-2-s0", plain_devices(1), pool="pool-2", slice_count=3),
        resource_slice("pool-2-s1", plain_devices(1, start=1), pool="pool-2", slice_count=3),
    ]
    status = final_status(request_spec(), slices)
    assert status["poolCount"] == 2
    pool_1, pool_2 = status["pools"]
    assert pool_1["totalDevices"] == 4
    assert pool_2["validationError"] == (
        "PoolIncomplete: pool gpu.example.com/pool-2 is incomplete: observed 2/3 slices at generation 1"
    )
    assert "totalDevices" not in pool_2
    assert status["conditions"][0]["message"] == "Calculated status for 2 pools (1 incomplete)"


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"node_name": "node-1"}, {"node_name": "node-1"}, "node-1"),
        ({"node_name": "node-1"}, {"node_name": "node-2"}, None),
        ({}, {}, None),
        ({"node_name": "node-1"}, {"all_nodes": True}, None),
    ],
)
def test_v11_node_name(first: dict[str, Any], second: dict[str, Any], expected: str | None) -> None:
    slices = [
        resource_slice("s0", plain_devices(2), slice_count=2, **first),
        resource_slice("s1", plain_devices(2, start=2), slice_count=2, **second),
    ]
    assert only_pool(slices).get("nodeName") == expected


def test_node_name_kept_on_incomplete_pool() -> None:
    slices = [resource_slice("s0", plain_devices(2), slice_count=2, node_name="node-1")]
    pool = only_pool(slices)
    assert pool["nodeName"] == "node-1"
    assert list(pool) == ["driver", "poolName", "generation", "nodeName", "validationError"]


def test_v12_many_claims_on_one_device_count_once() -> None:
    assert counts(only_pool(POOL_1, claims_on("device-0", "device-0", "device-0"))) == (4, 1, 3, 0)


def test_v13_admin_access_is_not_allocation() -> None:
    claims = [claim("c0", result("device-0")), claim("c1", result("device-1", admin=True))]
    assert counts(only_pool(POOL_1, claims)) == (4, 1, 3, 0)


@pytest.mark.parametrize(("effect", "unavailable"), [("NoSchedule", 2), ("NoExecute", 2), ("None", 0)])
def test_v14_device_taints(effect: str, unavailable: int) -> None:
    devices = [device(f"device-{i}", taints=[effect] if i < 2 else []) for i in range(5)]
    pool = only_pool([resource_slice("s0", devices)])
    assert counts(pool) == (5, 0, 5 - unavailable, unavailable)


def test_v15_taint_rule() -> None:
    rule = taint_rule("r1", "NoSchedule", {"driver": D, "pool": "pool-1", "device": "device-0"})
    assert counts(only_pool(POOL_1, rules=[rule])) == (4, 0, 3, 1)
    # (b): rules not in use means the caller passes none.
    assert counts(only_pool(POOL_1)) == (4, 0, 4, 0)


def test_v17a_incomplete_one_of_three() -> None:
    pool = only_pool([resource_slice("s0", plain_devices(4), slice_count=3)])
    assert pool["validationError"].endswith("observed 1/3 slices at generation 1")


def test_v17b_declared_attribute_without_shared_counters() -> None:
    devices = [device("d0", attributes={"profile": "Full"}, consumes=[("gpu-0", {"memory": "80Gi"})])]
    pool = only_pool([resource_slice("s0", devices, partition_attribute=A)])
    assert pool["totalDevices"] == 1
    assert pool["validationError"] == (
        "PartitionTypeMissing: pool gpu.example.com/pool-1 declares partitionTypeAttribute "
        "but publishes no sharedCounters"
    )
    assert "partitionSummary" not in pool


def test_v17c_declared_attribute_without_consumption() -> None:
    devices = [device("d0", attributes={"profile": "Full"})]
    pool = only_pool([resource_slice("s0", devices, partition_attribute=A)])
    assert "validationError" not in pool
    assert "partitionSummary" not in pool


def test_v18_plain_pool_of_other_driver() -> None:
    slices = [resource_slice("s0", plain_devices(10), driver="net.example.com")]
    pool = only_pool(slices, spec=request_spec("net.example.com"))
    assert counts(pool) == (10, 0, 10, 0)
    assert pool["resourceSliceCount"] == 1
    assert pool["generation"] == 1
    assert "nodeName" not in pool


def test_v19_allocated_tainted_device_is_allocated_only() -> None:
    devices = [
        device("device-0", taints=["NoExecute"]),
        device("device-1", taints=["NoSchedule"]),
        device("device-2", taints=["None"]),
        device("device-3"),
    ]
    pool = only_pool([resource_slice("s0", devices)], claims_on("device-0"))
    assert counts(pool) == (4, 1, 2, 1)


def test_v20_claims_on_unpublished_devices_ignored() -> None:
    assert counts(only_pool(POOL_1, claims_on("device-0", "device-9"))) == (4, 1, 3, 0)


def test_v21_rule_with_empty_selector() -> None:
    rule = taint_rule("r", "NoSchedule", {})
    assert counts(only_pool(POOL_1, claims_on("device-0"), [rule])) == (4, 1, 0, 3)


@pytest.mark.parametrize(
    "rule",
    [
        taint_rule("no-selector", "NoSchedule", None),
        taint_rule("other-driver", "NoSchedule", {"driver": "other.example.com"}),
        taint_rule("effect-none", "None", {}),
        taint_rule("other-pool", "NoExecute", {"pool": "pool-2"}),
    ],
)
def test_v21_rules_that_match_nothing(rule: DeviceTaintRule) -> None:
    assert counts(only_pool(POOL_1, rules=[rule])) == (4, 0, 4, 0)


@pytest.mark.parametrize(
    "narrowing",
    [
        {"deviceClassName": "gpu"},
        {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
        {"driver": "gpu.example.com", "pool": "pool-1", "deviceClassName": "gpu"},
    ],
)
def test_rule_with_class_or_cel_selector_is_ignored(narrowing: dict[str, Any]) -> None:
    rule = DeviceTaintRule.model_validate(
        {
            "metadata": {"name": "by-class"},
            "spec": {"taint": {"key": "k", "effect": "NoSchedule"}, "deviceSelector": narrowing},
        }
    )
    assert counts(only_pool(POOL_1, rules=[rule])) == (4, 0, 4, 0)


def test_v22_claim_on_device_of_older_generation() -> None:
    slices = [
        resource_slice("old", plain_devices(8), generation=1),
        resource_slice("new", plain_devices(4), generation=2),
    ]
    assert counts(only_pool(slices, claims_on("device-7"))) == (4, 0, 4, 0)


def test_v23_expected_is_maximum_announced() -> None:
    slices = [
        resource_slice("a", plain_devices(4), slice_count=2),
        resource_slice("b", plain_devices(4, start=4), slice_count=3),
    ]
    for ordering in (slices, list(reversed(slices))):
        pool = only_pool(ordering)
        assert pool["validationError"] == (
            "PoolIncomplete: pool gpu.example.com/pool-1 is incomplete: observed 2/3 slices at generation 1"
        )


def test_claims_in_other_namespaces_count() -> None:
    claims = [
        claim("c", result("device-0"), namespace="team-a"),
        claim("c", result("device-1"), namespace="team-b"),
    ]
    assert counts(only_pool(POOL_1, claims)) == (4, 2, 2, 0)


def test_unallocated_claim_is_ignored() -> None:
    pending = ResourceClaim.model_validate({"metadata": {"name": "p", "namespace": "default"}})
    assert counts(only_pool(POOL_1, [pending])) == (4, 0, 4, 0)
