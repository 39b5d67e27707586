"""``kubectl dra pools`` rendering: tables, bars and the -o json document (pure)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from devicehealth_builders import gpu, rule_body

from operators.dra.slices import ResourceSlice, SliceDevice
from operators.kubectl_dra.devicetaints import PlacedTaint, parse_rules, placed_taints
from operators.kubectl_dra.poolview import Answer, document, render, render_pool
from operators.kubectl_dra.tables import bar, percent, table

GPU = "gpu.example.com"
COMPLETE = {
    "type": "Complete",
    "status": "True",
    "reason": "CalculationComplete",
    "message": "Calculated status for 1 pools",
    "lastTransitionTime": "2026-09-01T10:00:00Z",
}


def _gpu_pool() -> dict[str, Any]:
    """Fixture G of the poolstatus spec with half-0 allocated."""
    return {
        "driver": GPU,
        "poolName": "pool-1",
        "generation": 1,
        "resourceSliceCount": 2,
        "totalDevices": 3,
        "allocatedDevices": 1,
        "availableDevices": 2,
        "unavailableDevices": 0,
        "nodeName": "node-1",
        "partitionSummary": [
            {"attribute": f"{GPU}/profile", "type": "Full", "total": 1, "allocatable": 0},
            {"attribute": f"{GPU}/profile", "type": "Half", "total": 2, "allocatable": 1},
        ],
    }


def _answer(*pools: dict[str, Any], count: int | None = None, driver: str = GPU) -> Answer:
    status = {"poolCount": len(pools) if count is None else count, "conditions": [COMPLETE]}
    if pools:
        status["pools"] = list(pools)
    return Answer(driver, None, status)


def test_partitionable_pool_table() -> None:
    assert render([_answer(_gpu_pool())]) == (
        "Pool gpu.example.com/pool-1 (node node-1, generation 1, 2 slices)\n"
        "  TOTAL  ALLOCATED  AVAILABLE  UNAVAILABLE  UTILISATION\n"
        "  3      1          2          0            #######.............  33%\n"
        "  PARTITION TYPE  ATTRIBUTE                TOTAL  ALLOCATABLE\n"
        "  Full            gpu.example.com/profile  1      0\n"
        "  Half            gpu.example.com/profile  2      1\n"
        "  Partition types are alternative ways to use the same hardware: do not add them up.\n"
        "\n"
        "Bars: # allocated, x unavailable (tainted), . available.\n"
    )


def test_shareable_pool_with_tainted_devices() -> None:
    pool = {
        "driver": "nic.example.com",
        "poolName": "nics",
        "generation": 3,
        "resourceSliceCount": 1,
        "totalDevices": 4,
        "allocatedDevices": 1,
        "availableDevices": 2,
        "unavailableDevices": 1,
        "shareableSummary": {
            "fullyAvailableDevices": 2,
            "partiallyAvailableDevices": 1,
            "capacity": [{"name": "bandwidth", "total": "40Gi", "consumed": "4Gi", "available": "36Gi"}],
        },
    }
    assert render_pool(pool) == [
        "Pool nic.example.com/nics (generation 3, 1 slice)",
        "  TOTAL  ALLOCATED  AVAILABLE  UNAVAILABLE  UTILISATION",
        "  4      1          2          1            #####xxxxx..........  25%",
        "  Shareable devices: 2 fully available, 1 partially available.",
        "  CAPACITY   TOTAL  CONSUMED  AVAILABLE  UTILISATION",
        "  bandwidth  40Gi   4Gi       36Gi       ##..................  10%",
    ]


def test_a_capacity_too_large_to_write_out_has_no_utilisation_bar() -> None:
    # A driver may publish 1e2147483647; poolstatus writes it as Go does, and reading it back must
    # not expand the power of ten.
    huge = "10e2147483646"
    pool = {
        "driver": "nic.example.com",
        "poolName": "nics",
        "generation": 1,
        "resourceSliceCount": 1,
        "totalDevices": 1,
        "allocatedDevices": 0,
        "availableDevices": 1,
        "unavailableDevices": 0,
        "shareableSummary": {
            "fullyAvailableDevices": 1,
            "partiallyAvailableDevices": 0,
            "capacity": [{"name": "mem", "total": huge, "consumed": "0", "available": huge}],
        },
    }
    assert render_pool(pool)[-1].split() == ["mem", huge, "0", huge, "-"]


def test_incomplete_pool_shows_only_its_error() -> None:
    pool = {
        "driver": GPU,
        "poolName": "p-c",
        "generation": 1,
        "validationError": f"PoolIncomplete: pool {GPU}/p-c is incomplete: observed 1/2 slices at "
        "generation 1",
    }
    text = render([_answer(pool)])
    assert text == (
        f"Pool {GPU}/p-c (generation 1)\n"
        f"  PoolIncomplete: pool {GPU}/p-c is incomplete: observed 1/2 slices at generation 1\n"
    )


def test_counts_stay_beside_a_view_error() -> None:
    pool = {**_gpu_pool(), "validationError": "PartitionCostMismatch: ..."}
    del pool["partitionSummary"]
    lines = render_pool(pool)
    assert lines[1].split() == ["TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE", "UTILISATION"]
    assert lines[-1] == "  PartitionCostMismatch: ..."


def test_truncation_and_empty_answers_are_explained() -> None:
    truncated = Answer(
        GPU, None, {"poolCount": 250, "pools": [_gpu_pool()], "conditions": [COMPLETE]}, limit=1
    )
    empty = Answer("absent.example.com", "p", {"poolCount": 0, "conditions": [COMPLETE]})
    text = render([truncated, empty])
    assert text.endswith(
        "Showing 1 of 250 pools of driver gpu.example.com: "
        "raise --limit (at most 1000) or pick one --pool.\n"
        "No pools of driver absent.example.com, pool p.\n"
        "Bars: # allocated, x unavailable (tainted), . available.\n"
    )
    assert render([empty]) == "No pools of driver absent.example.com, pool p.\n"


def test_document_keeps_the_pools_as_written() -> None:
    pool = _gpu_pool()
    doc = document("dra-operators.io/v1alpha1", [Answer(GPU, "pool-1", {**_answer(pool).status}, limit=5)])
    assert doc == {
        "apiVersion": "dra-operators.io/v1alpha1",
        "requests": [
            {
                "driver": GPU,
                "poolName": "pool-1",
                "limit": 5,
                "poolCount": 1,
                "condition": {k: COMPLETE[k] for k in ("type", "status", "reason", "message")},
            }
        ],
        "pools": [pool],
    }


@pytest.mark.parametrize(
    ("segments", "whole", "expected"),
    [
        ([(0, "#")], 10, "." * 20),
        ([(10, "#")], 10, "#" * 20),
        ([(1, "#")], 6, "###" + "." * 17),
        # One allocated device in a thousand still shows, and one free device too.
        ([(1, "#")], 1000, "#" + "." * 19),
        ([(999, "#")], 1000, "#" * 19 + "."),
        ([(1, "#"), (1, "x")], 1000, "#" + "." * 19),
        ([(2, "#"), (2, "x")], 4, "#" * 10 + "x" * 10),
        ([(Fraction(1, 2), "#")], 1, "#" * 10 + "." * 10),
        ([(5, "#")], 0, " " * 20),
    ],
)
def test_bar(segments: list[tuple[int | Fraction, str]], whole: int, expected: str) -> None:
    assert bar(segments, whole) == expected


def test_percent_and_table() -> None:
    assert [percent(1, 6), percent(1, 200), percent(1, 8), percent(3, 3), percent(1, 0)] == [
        "17%",
        "1%",
        "13%",
        "100%",
        "-",
    ]
    assert table(("A", "LONGER"), [("xyz", 1), ("", "")], indent="> ") == ["> A    LONGER", "> xyz  1", ">"]


# --- the taints of the pools' devices (issue #41) ----------------------------------------------------


def _slice(**taints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "pool-1-gpus"},
        "spec": {
            "driver": GPU,
            "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": name, "taints": t} for name, t in taints.items()],
        },
    }


HEALTH_RULE = rule_body(gpu("pool-1", "gpu-1"))
SIGNAL = {"key": f"{GPU}/health", "value": "Unhealthy", "effect": "None"}


def _placed() -> dict[tuple[str, str], list[PlacedTaint]]:
    slices = [ResourceSlice[SliceDevice].model_validate(_slice(**{"gpu-0": [], "gpu-1": [SIGNAL]}))]
    found = placed_taints(slices, parse_rules([HEALTH_RULE]))
    return {(GPU, "pool-1"): [t for taints in found.values() for t in taints]}


def test_placed_taints_keep_their_source_and_the_policy_behind_a_rule() -> None:
    (taints,) = _placed().values()
    assert [(str(t.device), t.describe(), t.source) for t in taints] == [
        (
            f"{GPU}/pool-1/gpu-1",
            f"signal: {GPU}/health=Unhealthy (None: informational, blocks nothing)",
            "ResourceSlice pool-1-gpus .spec.devices[gpu-1].taints",
        ),
        (
            f"{GPU}/pool-1/gpu-1",
            "dra-operators.io/device-health=Unhealthy:NoExecute (DeviceHealthPolicy gpu-health)",
            "DeviceTaintRule gpu-health-21c87304f8ec .spec.taint",
        ),
    ]
    assert [t.blocks for t in taints] == [False, True]


def test_a_pool_lists_its_tainted_devices_with_signals_apart() -> None:
    pool = {**_gpu_pool(), "unavailableDevices": 1, "availableDevices": 1}
    del pool["partitionSummary"]
    assert render([_answer(pool)], _placed()) == (
        "Pool gpu.example.com/pool-1 (node node-1, generation 1, 2 slices)\n"
        "  TOTAL  ALLOCATED  AVAILABLE  UNAVAILABLE  UTILISATION\n"
        "  3      1          1          1            #######xxxxxx.......  33%\n"
        "  DEVICE  TAINT                                     EFFECT         FROM\n"
        "  gpu-1   gpu.example.com/health=Unhealthy          None (signal)  ResourceSlice pool-1-gpus\n"
        "  gpu-1   dra-operators.io/device-health=Unhealthy  NoExecute      "
        "DeviceTaintRule gpu-health-21c87304f8ec of DeviceHealthPolicy gpu-health\n"
        "\n"
        "Bars: # allocated, x unavailable (tainted), . available.\n"
        "Taints: NoSchedule keeps new claims off a device, NoExecute also evicts the pods using it; "
        "a None taint is a signal, informational: it blocks nothing.\n"
    )
    assert render([_answer(pool)], {}, "forbidden while listing devicetaintrules: no").endswith(
        "DeviceTaintRules are not shown: forbidden while listing devicetaintrules: no.\n"
    )


def test_the_document_adds_device_taints_only_when_there_are_some() -> None:
    assert "deviceTaints" not in document("v", [_answer(_gpu_pool())], {})
    entries = document("v", [_answer(_gpu_pool())], _placed())["deviceTaints"]
    assert entries[1] == {
        "driver": GPU,
        "poolName": "pool-1",
        "device": "gpu-1",
        "key": "dra-operators.io/device-health",
        "value": "Unhealthy",
        "effect": "NoExecute",
        "source": "DeviceTaintRule gpu-health-21c87304f8ec .spec.taint",
        "deviceHealthPolicy": "gpu-health",
    }
    assert "deviceHealthPolicy" not in entries[0]
