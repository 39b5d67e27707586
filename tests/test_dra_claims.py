"""The shared ResourceClaim projection, generic in what an operator keeps of an allocation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from operators.dra import claims
from operators.dra.pools import DeviceId


class _Result(claims.DeviceRequestAllocationResult):
    admin_access: bool | None = None


Allocation = claims.AllocationResult[_Result]
Claim = claims.ResourceClaim[Allocation]


def _claim(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "annotations": {"a": "b"}},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": status,
    }


def _result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": "d", "pool": "p", "device": device, **extra}


def test_reads_the_allocated_devices_and_the_consumers() -> None:
    claim = Claim.model_validate(
        _claim(
            allocation={
                "devices": {"results": [_result("d0"), _result("d1", adminAccess=True)], "config": []},
                "nodeSelector": {},
            },
            reservedFor=[
                {"resource": "pods", "name": "p", "uid": "pu"},
                {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "gu"},
            ],
        )
    )
    assert (claim.name, claim.namespace, claim.uid, claim.key) == ("c", "ns", "u", ("ns", "c"))
    assert claim.status.allocation is not None
    results = claim.status.allocation.devices.results
    assert [(r.driver, r.pool, r.device, r.admin_access) for r in results] == [
        ("d", "p", "d0", None),
        ("d", "p", "d1", True),
    ]
    assert [(c.name, c.is_pod) for c in claim.status.reserved_for] == [("p", True), ("g", False)]


def test_an_unallocated_claim_and_null_lists() -> None:
    assert Claim.model_validate(_claim()).status.allocation is None
    claim = Claim.model_validate(_claim(allocation={"devices": {"results": None}}, reservedFor=None))
    assert claim.status.allocation is not None
    assert claim.status.allocation.devices.results == ()
    assert claim.status.reserved_for == ()
    assert Claim.model_validate({"metadata": {"name": "c"}}).status.reserved_for == ()


@pytest.mark.parametrize(
    ("consumer", "is_pod"),
    [
        ({"resource": "pods"}, True),
        ({"apiGroup": "", "resource": "pods"}, True),
        ({"apiGroup": "example.com", "resource": "pods"}, False),
        ({"apiGroup": "scheduling.k8s.io", "resource": "podgroups"}, False),
    ],
)
def test_only_core_pods_are_pod_consumers(consumer: dict[str, str], is_pod: bool) -> None:
    assert claims.ConsumerReference.model_validate(consumer).is_pod is is_pod


def test_a_result_names_its_device() -> None:
    with pytest.raises(ValidationError):
        Claim.model_validate(_claim(allocation={"devices": {"results": [{"driver": "d", "pool": "p"}]}}))


def test_keeps_nothing_unread() -> None:
    body = _claim(allocation={"devices": {"results": [_result("d0", tolerations=[{"key": "k"}])]}})
    body["status"]["devices"] = [{"driver": "d", "pool": "p", "device": "d0", "data": {"big": "z"}}]
    text = Claim.model_validate(body).model_dump_json(by_alias=True)
    for unread in ("annotations", "requests", "request", "tolerations", "big"):
        assert f'"{unread}"' not in text


def test_results_on_names_the_results_that_allocate_one_of_the_devices() -> None:
    claim = Claim.model_validate(
        _claim(allocation={"devices": {"results": [_result("a"), _result("b")]}}, reservedFor=[])
    )
    assert [r.device for r in claims.results_on(claim, {DeviceId("d", "p", "b")})] == ["b"]
    assert claims.results_on(claim, set()) == []
    assert claims.results_on(Claim.model_validate(_claim()), {DeviceId("d", "p", "b")}) == []
    assert not claims.is_allocated(Claim.model_validate(_claim()))
    assert claims.is_allocated(claim)
