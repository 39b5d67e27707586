"""Plain pods stay out of the caches (issue #23): beside 3000 pods that use no claim, 100 pods with
a claim from a template each get exactly one claim, and the caches of the two operators that watch
Pods hold the pods that use claims, read from their own ``dra_operators_cached_objects`` gauge.

The pods name a scheduler nobody runs, so they stay pending and load neither kube-scheduler nor
the real node; the template's class has no device."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import Kube, wait_for
from e2e.bench.env import bounded_gather, interleave, run_async
from e2e.harness import metric
from e2e.resourceclaim.support import absent_template, claims_by_pod, pod_body, pods_path, template_entry
from operators.core.client import KubeClient

pytestmark = [pytest.mark.timeout(600)]

PLAIN = 3000
DRA = 100
CACHED = "dra_operators_cached_objects"


def _bodies() -> list[dict[str, Any]]:
    plain = [pod_body(f"plain-{i:04d}", []) for i in range(PLAIN)]
    dra = [pod_body(f"dra-{i:03d}", [template_entry("gpu", "tmpl")]) for i in range(DRA)]
    return interleave(plain, dra)


def _claim_using_pods(api: Kube) -> int:
    """Pods of the whole cluster that reference a claim: earlier tests' pods may still be going."""
    return sum(1 for pod in api.list("/api/v1/pods") if pod["spec"].get("resourceClaims"))


def _recorded(api: Kube, namespace: str) -> int:
    pods = api.list(pods_path(namespace))
    return sum(1 for pod in pods if (pod.get("status") or {}).get("resourceClaimStatuses"))


def test_plain_pods_are_not_cached(api: Kube, namespace: str, operator: Callable[..., Any]) -> None:
    absent_template(api, namespace)
    with operator("resourceclaim") as rc, operator("devicetaint") as dt:
        bodies = _bodies()
        assert len(bodies) == PLAIN + DRA

        async def create_all(client: KubeClient) -> None:
            path = pods_path(namespace)
            await bounded_gather([functools.partial(client.create, path, body) for body in bodies])

        run_async(create_all, api.kubeconfig)
        wait_for(lambda: _recorded(api, namespace) == DRA, 240, f"{DRA} pod statuses to name their claims")

        claims = claims_by_pod(api, namespace)
        assert sorted(claims) == [f"dra-{i:03d}" for i in range(DRA)]
        assert all(len(names) == 1 for names in claims.values()), claims

        def caches_hold_only_claim_users() -> dict[str, float] | None:
            expected = _claim_using_pods(api)
            held = {op.name: metric(op.metrics(), CACHED, resource="pods") or 0.0 for op in (rc, dt)}
            return held if all(count == expected for count in held.values()) else None

        held = wait_for(caches_hold_only_claim_users, 60, "the caches to hold just the pods that use claims")
        assert held is not None
        for name, count in held.items():
            assert DRA <= count < DRA + PLAIN, (name, count)
        # The plain pods did reach both operators: they were dropped, not missed.
        for op in (rc, dt):
            added = metric(op.metrics(), "dra_operators_watch_events_total", resource="pods", type="ADDED")
            assert added is not None
            assert added >= PLAIN + DRA, (op.name, added)
