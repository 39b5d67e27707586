"""The operator's cache: projections indexed by driver, requests keyed by (surface, name)."""

from __future__ import annotations

from poolstatus_builders import claim, plain_devices, resource_slice, result, taint_rule

from operators.poolstatus.cache import Caches
from operators.poolstatus.models import ResourcePoolStatusRequest
from operators.poolstatus.surfaces import BUILTIN, PROJECT


def request(name: str, driver: str = "gpu.example.com", done: bool = False) -> ResourcePoolStatusRequest:
    body: dict[str, object] = {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"driver": driver}}
    if done:
        body["status"] = {"poolCount": 0}
    return ResourcePoolStatusRequest.model_validate(body)


def test_slices_are_indexed_by_driver_and_follow_a_driver_change() -> None:
    caches = Caches()
    assert caches.put_slice(resource_slice("s", plain_devices(1), driver="a.com")) == {"a.com"}
    assert caches.put_slice(resource_slice("s", plain_devices(2), driver="b.com")) == {"a.com", "b.com"}
    assert "a.com" not in caches.slices_by_driver
    assert [len(s.spec.devices or ()) for s in caches.snapshot("b.com", False).slices] == [2]
    assert caches.remove_slice("s") == {"b.com"}
    assert caches.remove_slice("s") == set()
    assert caches.snapshot("b.com", False).slices == []


def test_only_allocated_claims_are_kept_per_driver() -> None:
    caches = Caches()
    caches.put_claim(claim("c1", result("device-0", driver="a.com"), result("device-1", driver="b.com")))
    caches.put_claim(claim("c2"))  # no results: cannot allocate anything
    assert set(caches.claims) == {"default/c1"}
    assert [c.metadata.name for c in caches.snapshot("b.com", False).claims] == ["c1"]
    caches.put_claim(claim("c1", result("device-0", driver="a.com")))
    assert caches.snapshot("b.com", False).claims == []
    caches.remove_claim("default/c1")
    assert caches.claims_by_driver == {}


def test_rules_only_when_in_use() -> None:
    caches = Caches()
    caches.put_rule(taint_rule("r", "NoSchedule", {}))
    assert len(caches.snapshot("x", True).rules) == 1
    assert caches.snapshot("x", False).rules == []
    caches.remove_rule("r")
    assert caches.snapshot("x", True).rules == []


def test_requests_of_both_surfaces_are_independent() -> None:
    caches = Caches()
    caches.put_request(BUILTIN, request("check-gpus"))
    caches.put_request(PROJECT, request("check-gpus", done=True))
    caches.put_request(PROJECT, request("other", driver="b.com"))
    assert set(caches.requests) == {
        ("resource.k8s.io", "check-gpus"),
        ("dra-operators.io", "check-gpus"),
        ("dra-operators.io", "other"),
    }
    assert [e.key for e in caches.pending_of_driver("gpu.example.com")] == [("resource.k8s.io", "check-gpus")]
    assert (caches.pending_count("resource.k8s.io"), caches.pending_count("dra-operators.io")) == (1, 1)
    removed = caches.remove_request(("resource.k8s.io", "check-gpus"))
    assert removed is not None
    assert removed.uid == "uid-check-gpus"
    assert caches.pending_count("resource.k8s.io") == 0
