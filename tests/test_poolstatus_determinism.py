"""Determinism (decision D8): spec vectors 70 and 71.

Vector 71 feeds representative scenarios of vectors 24-69 in random orders (slices,
devices within slices, claims and rules) and expects byte-identical statuses.
"""

from __future__ import annotations

import json
import random

import pytest
from poolstatus_builders import (
    A,
    Scenario,
    device,
    final_status,
    fixture_g_slices,
    only_pool,
    representative_scenarios,
    resource_slice,
)


def test_v70_missing_type_names_first_device_in_canonical_order() -> None:
    half_0 = device("half-0", consumes=[("gpu-0", {"memory": "40Gi"})])
    half_1 = device("half-1", consumes=[("gpu-0", {"memory": "40Gi"})])
    slices = [
        resource_slice("pool-1-counters", slice_count=3, shared_counters={"gpu-0": {"memory": "80Gi"}}),
        resource_slice("s-b", [half_0], slice_count=3, partition_attribute=A),
        resource_slice("s-a", [half_1], slice_count=3, partition_attribute=A),
    ]
    assert only_pool(slices)["validationError"].startswith('PartitionTypeMissing: device "half-0"')


def test_v70_cost_mismatch_reported_before_missing_type() -> None:
    devices = [
        device("c-0", consumes=[("gpu-0", {"memory": "40Gi"})]),
        device("b-0", attributes={"profile": "Half"}, consumes=[("gpu-0", {"memory": "50Gi"})]),
        device("a-0", attributes={"profile": "Half"}, consumes=[("gpu-0", {"memory": "40Gi"})]),
    ]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert pool["validationError"].startswith('PartitionCostMismatch: devices of partition type "Half"')


def shuffled(scenario: Scenario, rng: random.Random) -> Scenario:
    slices = []
    for s in scenario.slices:
        devices = list(s.spec.devices or ())
        rng.shuffle(devices)
        slices.append(s.model_copy(update={"spec": s.spec.model_copy(update={"devices": tuple(devices)})}))
    rng.shuffle(slices)
    claims = list(scenario.claims)
    rng.shuffle(claims)
    rules = list(scenario.rules)
    rng.shuffle(rules)
    return Scenario(scenario.spec, slices, claims, rules)


@pytest.mark.parametrize("name", sorted(representative_scenarios()))
def test_v71_order_does_not_matter(name: str) -> None:
    scenario = representative_scenarios()[name]
    reference = json.dumps(final_status(scenario.spec, scenario.slices, scenario.claims, scenario.rules))
    rng = random.Random(name)
    for _ in range(20):
        variant = shuffled(scenario, rng)
        assert (
            json.dumps(final_status(variant.spec, variant.slices, variant.claims, variant.rules)) == reference
        )


def test_mixed_format_sums_take_first_operand_format() -> None:
    scenario = representative_scenarios()["shareable-mixed-formats"]
    status = final_status(scenario.spec, scenario.slices, scenario.claims)
    [pool] = status["pools"]
    # total: 10Gi + 10G + 10Gi + 10G, binary because nic-0a comes first; it is a whole number of Ki.
    # consumed: (1G + 1Gi) on nic-0a, 2Gi on nic-0b, 10G on nic-1b, decimal because 1G comes first.
    assert pool["shareableSummary"]["capacity"] == [
        {"name": "bandwidth", "total": "40502770Ki", "consumed": "14221225472", "available": "27253611008"}
    ]
    assert pool["shareableSummary"]["partiallyAvailableDevices"] == 2
