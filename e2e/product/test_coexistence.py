"""The coexistence guard on an upstream-mode cluster, where kube-controller-manager's own DRA
controllers run (what a managed cluster looks like): each replacement operator, started beside
its in-tree counterpart, sees it act, stops writing, and says so (not ready, a Warning Event,
the gauge, a log line naming the flag). With ``--allow-in-tree-controller`` it acts anyway.

The first object of each test is a race between the two controllers: which one writes first is
not ours to decide, and where ours wins outright the in-tree one finds nothing left to do and
leaves no trace. So each test creates objects one at a time until the guard fires (the issue's
"within one conflicting write"), then checks that nothing created afterwards carries a write of
ours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster import launcher
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.poolstatus.support import BUILTIN, request_body
from e2e.resourceclaim.support import (
    claims_of_pod,
    create_pod,
    create_template,
    pod_body,
    pods_path,
    template_body,
    template_entry,
)

# The version pass runs it too: each version's in-tree controllers must leave the signatures the
# guard knows; each test that needs an API asks for it (needs_served).
pytestmark = [pytest.mark.differential, pytest.mark.versions, pytest.mark.timeout(300)]

RESOURCE = "/apis/resource.k8s.io/v1"
RULES = f"{RESOURCE}/devicetaintrules"
ATTEMPTS = 10
STARTS = 5
PODS_PER_START = 4


@pytest.fixture(scope="module")
def identity(upstream_cluster: harness.Cluster, upstream_api: Kube) -> Callable[[str], str]:
    objects = harness.rbac_objects(upstream_cluster)
    harness.apply_rbac(upstream_cluster, objects)

    def kubeconfig_for(operator: str) -> str:
        namespace, account = harness.service_account_of(objects, operator)
        return harness.token_kubeconfig(upstream_cluster, upstream_api, namespace, account)

    return kubeconfig_for


@pytest.fixture
def beside_in_tree(
    upstream_cluster: harness.Cluster, identity: Callable[[str], str]
) -> Iterator[Callable[..., harness.RunningOperator]]:
    """``beside_in_tree(name, *args)`` starts our operator on the upstream-mode cluster."""
    started: list[harness.RunningOperator] = []

    def start(name: str, *args: str, wait_ready: bool = True) -> harness.RunningOperator:
        op = harness.start_operator(
            name, identity(name), upstream_cluster.workdir, "subprocess", args, wait_ready=wait_ready
        )
        op.expects_in_tree = True
        started.append(op)
        return op

    yield start
    for op in started:
        op.stop()


def _managers(obj: dict[str, Any]) -> set[str]:
    return {entry.get("manager", "") for entry in obj["metadata"].get("managedFields") or []}


def _ours(obj: dict[str, Any]) -> set[str]:
    return {m for m in _managers(obj) if m.startswith("dra-operators-")}


def _tripped(op: harness.RunningOperator, controller: str) -> bool:
    return controller in harness.in_tree_detected(op.metrics())


def _wait_tripped(op: harness.RunningOperator, controller: str) -> None:
    wait_for(lambda: _tripped(op, controller), 30, f"the guard to see {controller}")


def _until_tripped(op: harness.RunningOperator, controller: str, create_one: Callable[[int], None]) -> int:
    """Create objects one at a time until the guard fires; how many it took."""
    for attempt in range(ATTEMPTS):
        create_one(attempt)
        try:
            wait_for(lambda: _tripped(op, controller), 10, f"the guard to see {controller}")
            return attempt + 1
        except AssertionError:
            continue
    raise AssertionError(
        f"{op.name} never saw {controller} in {ATTEMPTS} objects; its log:\n{op.log()[-3000:]}"
    )


def _reported(api: Kube, op: harness.RunningOperator, controller: str) -> None:
    """Not ready with the reason, live, a Warning Event, and the log line naming the flag."""
    status, text = launcher.http_get(op.health_url.replace("/healthz", "/readyz"))
    assert status == 503, text
    assert f"kube-controller-manager's {controller} acts on the same objects" in text, text
    assert launcher.http_get(op.health_url)[0] == 200, "live: restarting would change nothing"
    flag = f"--controllers=*,-{controller}"
    assert flag in op.log(), f"no log line names {flag}"

    def event() -> dict[str, Any] | None:
        for item in api.list("/api/v1/events"):
            if item["reason"] == "InTreeControllerDetected" and item["source"].get("component") == (
                f"dra-operators-{op.name}"
            ):
                return item
        return None

    found = wait_for(event, 15, "the InTreeControllerDetected Event")
    assert found is not None
    assert found["type"] == "Warning"
    assert flag in found["message"]
    print(f"\n/readyz: {text.strip()}\nEvent on {found['involvedObject']['kind']}: {found['message']}")


def test_resourceclaim_stops_beside_the_in_tree_controller(
    upstream_api: Kube, upstream_namespace: str, beside_in_tree: Callable[..., harness.RunningOperator]
) -> None:
    api, ns = upstream_api, upstream_namespace
    create_template(api, ns, template_body("gpu"))
    # It asks kube-controller-manager before its first write, so it may never become ready.
    op = beside_in_tree("resourceclaim", wait_ready=False)

    def pod(index: int, prefix: str = "race") -> None:
        create_pod(api, ns, pod_body(f"{prefix}-{index}", [template_entry("gpu", "gpu")]))

    took = _until_tripped(op, "resourceclaim-controller", pod)
    _reported(api, op, "resourceclaim-controller")

    after = [f"after-{i}" for i in range(5)]
    for index in range(len(after)):
        pod(index, "after")

    _one_claim_each_and_none_of_ours(api, ns, after, 60)
    print(f"resourceclaim: the guard fired at race pod {took}")


def _one_claim_each_and_none_of_ours(api: Kube, ns: str, names: list[str], within: float) -> None:
    """The in-tree controller gives every pod its claim, and nothing of ours is on them."""

    def handled() -> bool:
        return all(
            api.get(pods_path(ns, name)).get("status", {}).get("resourceClaimStatuses") for name in names
        )

    wait_for(handled, within, "the in-tree controller to give every pod its claim")
    for name in names:
        obj = api.get(pods_path(ns, name))
        owned = claims_of_pod(api, ns, obj)
        assert len(owned) == 1, f"{name}: {[c['metadata']['name'] for c in owned]}"
        assert not _ours(obj), f"{name}: a write of ours"
        assert not _ours(owned[0]), f"{owned[0]['metadata']['name']}: a write of ours"


@pytest.mark.parametrize("created", ["before", 0, 1, 4])
def test_resourceclaim_asks_before_its_first_write(
    upstream_api: Kube,
    upstream_namespace: str,
    beside_in_tree: Callable[..., harness.RunningOperator],
    created: str | int,
) -> None:
    """Issue #38: the guard knows before the operator's first write, so no pod ever gets a second
    claim, whether the template pods were pending when the operator started or came 0, 1 or 4 s
    after it; five starts each."""
    api, ns = upstream_api, upstream_namespace
    create_template(api, ns, template_body("gpu"))
    names: list[str] = []
    for run in range(STARTS):

        def burst(run: int = run) -> None:
            for index in range(PODS_PER_START):
                name = f"start-{run}-{index}"
                create_pod(api, ns, pod_body(name, [template_entry("gpu", "gpu")]))
                names.append(name)

        if created == "before":
            burst()
        # Not ready at all when the guard answers before the first write: only alive.
        op = beside_in_tree("resourceclaim", wait_ready=False)
        if created != "before":
            # The scenario's own timing (pods that come while the operator starts), not a wait.
            time.sleep(float(created))
            burst()
        _wait_tripped(op, "resourceclaim-controller")
        op.stop()

    _one_claim_each_and_none_of_ours(api, ns, names, 120)


def test_resourceclaim_acts_with_the_override(
    upstream_api: Kube, upstream_namespace: str, beside_in_tree: Callable[..., harness.RunningOperator]
) -> None:
    api, ns = upstream_api, upstream_namespace
    create_template(api, ns, template_body("gpu"))
    op = beside_in_tree("resourceclaim", "--allow-in-tree-controller")
    names = [f"both-{i}" for i in range(ATTEMPTS)]
    for name in names:
        create_pod(api, ns, pod_body(name, [template_entry("gpu", "gpu")]))
    wait_for(lambda: _tripped(op, "resourceclaim-controller"), 30, "the guard to see the in-tree controller")

    def ours_wrote() -> bool:
        return any(_ours(c) for c in api.list(f"{RESOURCE}/namespaces/{ns}/resourceclaims"))

    wait_for(ours_wrote, 30, "a claim created by our operator")
    assert op.ready(), "the override keeps it ready"
    assert "acting anyway" in op.log()


@pytest.mark.needs_served("rule_version")
def test_devicetaint_stops_beside_the_in_tree_controller(
    upstream_api: Kube,
    beside_in_tree: Callable[..., harness.RunningOperator],
    unique_name: Callable[[str], str],
) -> None:
    api = upstream_api
    op = beside_in_tree("devicetaint")
    prefix = unique_name("guard")
    created: list[str] = []

    def rule(index: int, kind: str = "race") -> None:
        name = f"{prefix}-{kind}-{index}"
        api.create(
            RULES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": name},
                "spec": {
                    "deviceSelector": {"driver": f"{prefix}.example.com"},
                    "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
                },
            },
        )
        created.append(name)

    try:
        took = _until_tripped(op, "device-taint-eviction-controller", rule)
        _reported(api, op, "device-taint-eviction-controller")
        rule(0, "after")
        name = created[-1]

        def conditioned() -> dict[str, Any] | None:
            obj = api.get(f"{RULES}/{name}")
            return obj if (obj.get("status") or {}).get("conditions") else None

        later = wait_for(conditioned, 60, "the in-tree controller to write the later rule's condition")
        assert later is not None
        assert not _ours(later), f"a write of ours on {name} after the guard fired: {_managers(later)}"
        print(f"devicetaint: the guard fired at race rule {took}")
    finally:
        for name in created:
            api.delete(f"{RULES}/{name}")


@pytest.mark.needs_served("builtin_pool_status")
def test_poolstatus_stops_beside_the_in_tree_controller(
    upstream_api: Kube,
    beside_in_tree: Callable[..., harness.RunningOperator],
    unique_name: Callable[[str], str],
) -> None:
    api = upstream_api
    op = beside_in_tree("poolstatus", "--builtin-api=on")
    prefix = unique_name("guard")
    created: list[str] = []

    def request(index: int, kind: str = "race") -> None:
        name = f"{prefix}-{kind}-{index}"
        api.create(BUILTIN.path(), request_body(BUILTIN, name, f"{prefix}.example.com"))
        created.append(name)

    try:
        took = _until_tripped(op, "resourcepoolstatusrequest-controller", request)
        _reported(api, op, "resourcepoolstatusrequest-controller")
        request(0, "after")
        name = created[-1]
        later = wait_for(
            lambda: (lambda o: o if o.get("status") else None)(api.get(BUILTIN.path(name))),
            60,
            "the in-tree controller to calculate the later request",
        )
        assert later is not None
        assert not _ours(later), f"a write of ours on {name} after the guard fired: {_managers(later)}"
        print(f"poolstatus: the guard fired at race request {took}")
    finally:
        for name in created:
            api.delete(BUILTIN.path(name))
