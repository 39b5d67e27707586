"""The dry run of an ``effect: None`` DeviceTaintSelector: each pod, claim and namespace counted once
over the whole selection, not once per rule (issue #27)."""

from __future__ import annotations

from typing import Any

import pytest
from taintselector_builders import GPU_DRIVER, selector

from operators.dra.selection import Selection
from operators.taintselector.cache import ClusterCache
from operators.taintselector.dryrun import AllocatedClaim, DryRun, dry_run
from operators.taintselector.models import DeviceId
from operators.taintselector.status import selector_status

pytestmark = pytest.mark.unit

KEY = "dra.example.com/unhealthy"
GPU = [DeviceId(GPU_DRIVER, "node-1", f"gpu-{i}") for i in range(4)]


def claim_body(
    name: str,
    devices: list[DeviceId],
    pods: list[str],
    *,
    namespace: str = "ml",
    tolerations: list[dict[str, Any]] | None = None,
    allocated: bool = True,
) -> dict[str, Any]:
    results = [
        {
            "request": f"r{i}",
            "driver": d.driver,
            "pool": d.pool,
            "device": d.device,
            "tolerations": tolerations or [],
        }
        for i, d in enumerate(devices)
    ]
    status: dict[str, Any] = {
        "reservedFor": [{"resource": "pods", "name": f"pod-{p}", "uid": p} for p in pods]
        + [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "pg", "uid": "G"}]
    }
    if allocated:
        status["allocation"] = {"devices": {"results": results}}
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}, "status": status}


def claim(*args: Any, **kwargs: Any) -> AllocatedClaim:
    return AllocatedClaim.model_validate(claim_body(*args, **kwargs))


def test_a_pod_on_two_selected_devices_counts_once() -> None:
    taint = selector(effect="None").spec.taint
    result = dry_run(
        taint,
        GPU[:3],
        [
            claim("two-gpus", GPU[:2], ["A"]),
            claim("shared", [GPU[2]], ["A", "B"], namespace="train"),
            claim("elsewhere", [GPU[3]], ["C"]),
        ],
    )
    assert result == DryRun(published_devices=3, allocated_devices=3, claims=2, pods=2, namespaces=2)
    assert result.message == (
        "3 published devices selected. 3 allocated devices selected. 2 claims are allocated on them. "
        "2 pods would be evicted in 2 different namespaces if the effect was NoExecute."
    )


def test_tolerating_claims_count_but_their_pods_stay() -> None:
    forever = {"key": KEY, "operator": "Exists", "effect": "NoExecute"}
    for_a_while = {**forever, "tolerationSeconds": 60}
    taint = selector(effect="None").spec.taint
    result = dry_run(
        taint,
        GPU[:2],
        [
            claim("stays", [GPU[0]], ["A"], tolerations=[forever]),
            claim("goes", [GPU[1]], ["B"], tolerations=[for_a_while]),
        ],
    )
    assert (result.claims, result.pods, result.namespaces) == (2, 1, 1)
    assert result.message.endswith("1 pod would be evicted in 1 namespace if the effect was NoExecute.")


def test_the_cache_keeps_allocated_claims_and_routes_to_dry_runs_only() -> None:
    cache = ClusterCache()
    cache.upsert_owner(selector(name="dry", effect="None").model_dump(by_alias=True))
    cache.upsert_owner(selector(name="evicting").model_dump(by_alias=True))
    assert cache.upsert_claim(claim_body("pending", [GPU[0]], [], allocated=False)) == []
    assert cache.claims == {}
    assert cache.upsert_claim(claim_body("c", [GPU[0]], ["A"])) == ["dry"]
    assert list(cache.claims) == ["ml/c"]
    # Deallocated: it leaves the cache, and the dry run is computed again without it.
    assert cache.upsert_claim(claim_body("c", [GPU[0]], ["A"], allocated=False)) == ["dry"]
    assert cache.claims == {}
    assert cache.delete_claim(claim_body("c", [GPU[0]], ["A"])) == []


def test_the_status_reports_the_dry_run_in_its_condition_and_counts() -> None:
    dry = selector(effect="None")
    counts = DryRun(published_devices=2, allocated_devices=1, claims=1, pods=1, namespaces=1)
    status = selector_status(
        dry, Selection(tuple(GPU[:2])), rules_available=True, pending=None, rules=[], dry_run=counts
    )
    assert status["dryRun"] == {
        "publishedDevices": 2,
        "allocatedDevices": 1,
        "claims": 1,
        "pods": 1,
        "namespaces": 1,
    }
    [eviction] = [c for c in status["conditions"] if c["type"] == "EvictionInProgress"]
    assert (eviction["status"], eviction["reason"], eviction["message"]) == (
        "False",
        "NoEffect",
        counts.message,
    )
    evicting = selector_status(
        selector(), Selection(tuple(GPU[:2])), rules_available=True, pending=None, rules=[]
    )
    assert "dryRun" not in evicting
