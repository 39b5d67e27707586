"""Restart safety of the resourceclaim operator (spec scenarios 11 and 30).

A burst of 500 template pods in 10 namespaces; the operator is SIGKILLed at about 30 % and
50 % of the claims and restarted each time. While it is down the second time, a pod
completes and a pod reserved on a claim being deleted disappears. In the end every pod
entry has exactly one claim and its status names it, and the missed cleanups are done.

The operator runs unthrottled (``--kube-api-qps=0``) to keep the burst short.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from devcluster.kube import Kube, wait_for
from e2e.resourceclaim.scenarios import Ctx, allocated_user_claim
from e2e.resourceclaim.support import (
    POD_CLAIM_NAME,
    RESOURCE_API,
    allocate,
    claims_path,
    create_pod,
    create_template,
    named_entry,
    pod_body,
    pod_consumer,
    pods_path,
    reserved_for,
    set_phase,
    template_body,
    template_entry,
    wait_claim,
    wait_generated,
)
from e2e.support import Tracker, cleanup_namespace, make_namespace

NAMESPACES = 10
PODS_PER_NAMESPACE = 50
TOTAL = NAMESPACES * PODS_PER_NAMESPACE
BURST_LABEL = "e2e.dra-operators.test/burst"
UNTHROTTLED = ("--kube-api-qps=0",)


@pytest.fixture
def burst_namespaces(api: Kube, request: pytest.FixtureRequest) -> Iterator[list[str]]:
    with ThreadPoolExecutor(NAMESPACES) as pool:
        names = list(pool.map(lambda _: make_namespace(api, request), range(NAMESPACES)))
    yield names
    with ThreadPoolExecutor(NAMESPACES) as pool:
        list(pool.map(lambda ns: cleanup_namespace(api, ns), names))


def _burst_claims(api: Kube) -> list[dict[str, Any]]:
    return api.list(f"{RESOURCE_API}/resourceclaims", labelSelector=BURST_LABEL)


def _start_burst(api: Kube, namespaces: list[str], pool: ThreadPoolExecutor) -> list[Future[Any]]:
    def create(ns: str, index: int) -> Any:
        body = pod_body(f"burst-{index}", [template_entry("gpu", "burst-tmpl")])
        body["metadata"]["labels"] = {BURST_LABEL: "true"}
        return create_pod(api, ns, body)

    return [pool.submit(create, ns, i) for i in range(PODS_PER_NAMESPACE) for ns in namespaces]


def test_sigkill_mid_burst_and_catch_up(
    api: Kube,
    burst_namespaces: list[str],
    operator: Callable[..., Any],
    objects: Tracker,
    unique_name: Callable[[str], str],
) -> None:
    node = unique_name("node")
    objects.node(node)
    for ns in burst_namespaces:
        create_template(api, ns, template_body("burst-tmpl", labels={BURST_LABEL: "true"}))
    ctx = Ctx(api, burst_namespaces[0], node)
    create_template(api, ctx.ns, template_body("catchup-tmpl"))

    with ThreadPoolExecutor(16) as pool:
        with operator("resourceclaim", extra_args=UNTHROTTLED) as first:
            # Scenario 30's objects, settled before the burst: a pod whose generated claim
            # is reserved, and a pod reserved on a user claim.
            done = create_pod(
                api, ctx.ns, pod_body("done", [template_entry("gpu", "catchup-tmpl")], node_name=node)
            )
            done_claim = wait_generated(api, ctx.ns, done, "gpu")["metadata"]["name"]
            allocate(api, ctx.ns, done_claim)
            allocated_user_claim(ctx, "leaving")
            leaving = create_pod(
                api, ctx.ns, pod_body("leaving", [named_entry("gpu", "leaving")], node_name=node)
            )
            for claim, pod in ((done_claim, done), ("leaving", leaving)):
                _wait_reserved(api, ctx.ns, claim, pod)

            creations = _start_burst(api, burst_namespaces, pool)
            wait_for(lambda: len(_burst_claims(api)) >= 0.3 * TOTAL, 60, "30 % of the claims", interval=0.1)
            first.kill()
            at_first_kill = len(_burst_claims(api))
        with operator("resourceclaim", extra_args=UNTHROTTLED) as second:
            # Half way, not further: an unthrottled operator with a warm start creates a hundred claims
            # and more between a poll and the kill, and the kill must land before the burst ends.
            wait_for(lambda: len(_burst_claims(api)) >= 0.5 * TOTAL, 60, "half of the claims", interval=0.1)
            second.kill()
            at_second_kill = len(_burst_claims(api))

        # What the operator misses while it is down (scenario 30).
        set_phase(api, ctx.ns, "done", "Succeeded")
        api.delete(claims_path(ctx.ns, "leaving"))
        api.delete(pods_path(ctx.ns, "leaving"), gracePeriodSeconds="0")
        pods = [future.result() for future in creations]

        with operator("resourceclaim", extra_args=UNTHROTTLED) as third:
            wait_for(
                lambda: all(_has_status(pod) for pod in _burst_pods(api)),
                90,
                "every burst pod to name its claim",
                interval=1.0,
            )
            _assert_one_claim_each(api, pods)
            wait_for(
                lambda: api.get_or_none(claims_path(ctx.ns, done_claim)) is None, 30, "the done pod's claim"
            )
            wait_for(lambda: api.get_or_none(claims_path(ctx.ns, "leaving")) is None, 30, "the leaving claim")
            assert third.ready()
    # Both kills hit the burst, not its end.
    assert at_first_kill < at_second_kill < TOTAL, (at_first_kill, at_second_kill)
    print(f"claims at the kills: {at_first_kill}, {at_second_kill} of {TOTAL}")


def _wait_reserved(api: Kube, ns: str, claim: str, pod: dict[str, Any]) -> None:
    consumers = [pod_consumer(pod)]
    wait_claim(api, ns, claim, lambda c: reserved_for(c) == consumers, f"{claim} to be reserved")


def _burst_pods(api: Kube) -> list[dict[str, Any]]:
    return api.list("/api/v1/pods", labelSelector=BURST_LABEL)


def _has_status(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("resourceClaimStatuses", [])
    return any(s.get("name") == "gpu" and s.get("resourceClaimName") for s in statuses)


def _assert_one_claim_each(api: Kube, pods: list[dict[str, Any]]) -> None:
    """Zero missing, zero duplicates: one claim per (pod UID, entry), named by the status."""
    by_owner: dict[tuple[str, str], list[str]] = {}
    for claim in _burst_claims(api):
        meta = claim["metadata"]
        for owner in meta.get("ownerReferences", []):
            if owner.get("controller"):
                key = (owner["uid"], meta["annotations"].get(POD_CLAIM_NAME, ""))
                by_owner.setdefault(key, []).append(meta["name"])
    missing, duplicated, mismatched = [], [], []
    current = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in _burst_pods(api)}
    for pod in pods:
        key = (pod["metadata"]["uid"], "gpu")
        names = by_owner.get(key, [])
        ref = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if not names:
            missing.append(ref)
        elif len(names) > 1:
            duplicated.append((ref, names))
        else:
            live = current[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
            statuses = {
                s["name"]: s.get("resourceClaimName") for s in live["status"]["resourceClaimStatuses"]
            }
            if statuses.get("gpu") != names[0]:
                mismatched.append((ref, statuses, names[0]))
    assert (missing, duplicated, mismatched) == ([], [], []), "missing, duplicated, mismatched claims"
    assert sum(len(v) for v in by_owner.values()) == TOTAL
