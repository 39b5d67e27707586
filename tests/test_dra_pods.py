"""The raw-pod pre-check that keeps plain pods out of the operators' parsers and caches."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from operators.core import metrics
from operators.devicetaint.cache import ClusterCache as DeviceTaintCache
from operators.dra.pods import pod_event_matters, pod_may_use_claims
from operators.resourceclaim.cache import ClusterCache as ResourceClaimCache
from operators.resourceclaim.models import Pod


def _pod(spec: Any = None, status: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
    if spec is not None:
        body["spec"] = spec
    if status is not None:
        body["status"] = status
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_pod({"containers": [{"name": "c"}]}, {"phase": "Running"}), False),
        (_pod(), False),
        (_pod({"resourceClaims": None}), False),
        (_pod({"resourceClaims": []}), False),
        (_pod({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}), True),
        (_pod({}, {"extendedResourceClaimStatus": {"resourceClaimName": "x"}}), True),
        (_pod({}, {"extendedResourceClaimStatus": None}), False),
        # A shape the API would never send goes to the operator's own parser, which reports it.
        (_pod("not a mapping"), True),
        (_pod({}, ["not", "a", "mapping"]), True),
    ],
)
def test_only_a_pod_that_certainly_uses_no_claim_is_dropped(body: dict[str, Any], expected: bool) -> None:
    assert pod_may_use_claims(body) is expected


def test_a_plain_pod_matters_only_while_it_is_cached() -> None:
    plain = _pod({"containers": [{"name": "c"}]})
    held: dict[tuple[str, str], str] = {}
    assert not pod_event_matters(plain, lambda ns, name: held.get((ns, name)))
    held[("ns", "p")] = "cached"
    assert pod_event_matters(plain, lambda ns, name: held.get((ns, name)))
    assert pod_event_matters({"metadata": "broken"}, lambda ns, name: None)


def test_every_pod_the_cache_keeps_passes_the_pre_check() -> None:
    """The pre-check may only drop what the caches would not keep."""
    for body in (
        _pod({"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}),
        _pod({}, {"extendedResourceClaimStatus": {"resourceClaimName": "x"}}),
        _pod({"containers": [{"name": "c"}]}),
    ):
        cache = ResourceClaimCache()
        cache.apply_pod_event(None, Pod.model_validate(body))
        assert (cache.pod("ns", "p") is not None) is pod_may_use_claims(body)


def _cached(resource: str) -> float:
    value = metrics.registry.get_sample_value("dra_operators_cached_objects", {"resource": resource})
    return value or 0.0


def test_cache_sizes_are_served_while_the_cache_lives() -> None:
    # The served sizes add up every live cache: other tests' caches, unreachable but not yet
    # collected, would count too. Those still reachable stay as they are during this test.
    gc.collect()
    before = {
        resource: _cached(resource) for resource in ("pods", "resourceslices", "resourceclaimtemplates")
    }
    cache = ResourceClaimCache()
    cache.apply_pod_event(
        None, Pod.model_validate(_pod({"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}))
    )
    state = DeviceTaintCache()
    metrics.report_cache(cache)
    metrics.report_cache(state)
    assert 'dra_operators_cached_objects{resource="pods"}' in metrics.exposition().decode()
    assert _cached("pods") == before["pods"] + 1
    assert _cached("resourceslices") == before["resourceslices"]
    assert _cached("resourceclaimtemplates") == before["resourceclaimtemplates"]
    del cache
    gc.collect()
    assert _cached("pods") == before["pods"], "a cache no longer alive is no longer served"
