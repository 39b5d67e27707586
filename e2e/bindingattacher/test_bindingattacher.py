"""Acceptance of the binding-condition attacher on a real 1.37.2 control plane (spec
bindingattacher §23): kube-scheduler with ``bindingTimeout: 30s`` allocates claims and waits in
PreBind, the attacher under its own ServiceAccount attaches through the Test action and reports
``status.devices`` conditions, and the scheduler binds, unreserves, retries or gives up.

- :func:`test_success_failure_timeout_and_two_drivers` runs scenarios 1, 2, 3, 4 and 7 at the
  same time under one attacher (the timeout scenario alone needs ~25 s), then deletes pods and
  claims and checks that everything was detached exactly once (5, and the common assertions);
- :func:`test_restart_mid_attach_completes_exactly_once` is scenario 6a;
- :func:`test_bad_policies` is scenario 8 (a-g).

The default cluster has no resourceclaim controller, so claims are standalone and the test
deletes them itself; :mod:`e2e.bindingattacher.test_bindingattacher_upstream` runs the template flow with the
in-tree controller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.kube import ApiError, Kube, WaitTimeout, wait_for
from e2e import harness
from e2e.bindingattacher import world as w
from e2e.support import Tracker

# The timings (attach deadline T0 + 22 s, binding by T0 + 12 s) assume the devcluster's 30 s
# scheduler bindingTimeout.
pytestmark = [pytest.mark.devcluster_only, pytest.mark.timeout(180)]

OPERATOR = "bindingattacher"
FAIL_ONCE = {"test.dra-operators.io/fail-allocations": "1"}
HANG = {"test.dra-operators.io/attach-outcome": "Hang"}


@pytest.fixture(scope="module")
def crds(cluster: harness.Cluster, api: Kube) -> None:
    if cluster.binding_timeout != w.BINDING_TIMEOUT:
        pytest.skip(f"needs kube-scheduler bindingTimeout {w.BINDING_TIMEOUT}, not {cluster.binding_timeout}")
    w.install_crds(cluster, api)


@pytest.fixture(scope="module")
def world(api: Kube, crds: None) -> Iterator[w.World]:
    tracker = Tracker(api)
    built = w.build_world(tracker, "ba")
    yield built
    tracker.cleanup()


@pytest.fixture(scope="module")
def restricted(cluster: harness.Cluster, api: Kube, crds: None) -> str:
    return w.restricted_kubeconfig(cluster, api)


@pytest.fixture
def run_attacher(cluster: harness.Cluster, restricted: str) -> Callable[..., Any]:
    """``with run_attacher() as op`` starts the attacher under its ServiceAccount."""

    def start(args: tuple[str, ...] = w.ARGS) -> Any:
        return harness.operator_running(OPERATOR, restricted, cluster.workdir, "subprocess", args)

    return start


@pytest.fixture
def clean_slate(api: Kube, world: w.World) -> Iterator[list[str]]:
    """Policies created by a test are listed here; at teardown they, any leftover ledger record
    and the inventories go (the test itself asserts that nothing was left behind)."""
    names: list[str] = []
    yield names
    w.remove_policies(api, names)
    w.clear_ledger(api)
    w.clear_inventories(api)
    w.clear_taint_rules(api)


def _create_policy(api: Kube, names: list[str], body: dict[str, Any]) -> None:
    names.append(body["metadata"]["name"])
    api.create(w.POLICIES, body)


def _standard_policies(api: Kube, names: list[str]) -> None:
    _create_policy(api, names, w.fabric_policy())
    _create_policy(api, names, w.nic_policy())


def _wait_standard_policies(api: Kube) -> None:
    for name in ("e2e-fabric", "e2e-nic"):
        w.wait_policy_ready(api, name, 20)


def _claim_and_pod(
    api: Kube,
    namespace: str,
    name: str,
    requests: list[tuple[str, str]],
    annotations: dict[str, str] | None = None,
) -> None:
    api.create(w.claim_path(namespace), w.claim_body(name, requests, annotations))
    api.create(w.pod_path(namespace), w.pod_body(f"{name}-pod", {"dev": {"resourceClaimName": name}}))


def _delete_all(api: Kube, namespace: str, claims: list[str]) -> None:
    for claim in claims:
        api.delete(w.pod_path(namespace, f"{claim}-pod"), gracePeriodSeconds="0")
    for claim in claims:
        w.release_claim(api, namespace, claim)


def _foreign_entry(claim: dict[str, Any], status: str) -> dict[str, Any]:
    result = next(r for r in claim["status"]["allocation"]["devices"]["results"] if r["driver"] == w.FOREIGN)
    meta = claim["metadata"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "status": {
            "devices": [
                {
                    "driver": w.FOREIGN,
                    "pool": result["pool"],
                    "device": result["device"],
                    "conditions": [
                        {
                            "type": t,
                            "status": status if t == w.FOREIGN_READY else "False",
                            "reason": "HarnessReady" if status == "True" else "HarnessWaiting",
                            "message": "written by the e2e harness",
                            "observedGeneration": meta.get("generation", 0),
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                        for t in (w.FOREIGN_READY, w.FOREIGN_FAILED)
                    ],
                }
            ]
        },
    }


def test_success_failure_timeout_and_two_drivers(
    api: Kube,
    namespace: str,
    world: w.World,
    run_attacher: Callable[..., Any],
    clean_slate: list[str],
    restricted: str,
) -> None:
    _standard_policies(api, clean_slate)
    fabric = w.class_name("ba", w.FABRIC)
    pairs = {name: f"{name}-pod" for name in ("ok", "fail", "hang", "two")}
    with run_attacher() as op, w.Observer(api, namespace, pairs) as seen:
        _wait_standard_policies(api)
        _claim_and_pod(api, namespace, "ok", [("gpu", fabric)])
        _claim_and_pod(api, namespace, "fail", [("gpu", fabric)], FAIL_ONCE)
        _claim_and_pod(api, namespace, "hang", [("gpu", fabric)], HANG)
        _claim_and_pod(
            api,
            namespace,
            "two",
            [("gpu", fabric), ("nic", w.class_name("ba", w.NIC)), ("ext", w.class_name("ba", w.FOREIGN))],
        )
        _check_two_drivers(api, namespace, seen.seen["two"], restricted)
        _check_success(api, namespace, seen.seen["ok"])
        _check_failure_then_retry(api, namespace, seen.seen["fail"], seen.taints)
        _check_timeout(api, namespace, seen.seen["hang"])
        _delete_all(api, namespace, list(pairs))
        wait_for(lambda: not w.records(api), 30, "every record to be detached and deleted")
        _check_inventory_after_cleanup(api)
        # The sweep (every 15 s here) deletes the failure taint once it expired (15 s).
        wait_for(lambda: not w.taint_rules(api), 35, "the expired DeviceTaintRule to be swept")
        text = op.metrics()
        assert not seen.errors, seen.errors
    _check_metrics(text)


def _check_success(api: Kube, namespace: str, seen: w.Seen) -> None:
    """Scenario 1 (standalone claim) and 4: pinned node recorded, readiness, binding, events."""
    claim = w.wait_entry_status(api, namespace, "ok", {(w.FABRIC, w.ATTACHED): "True"}, 20)
    pod = w.wait_bound(api, namespace, "ok-pod", 15)
    assert seen.first_allocated_at is not None
    progress = seen.first(w.ATTACHED, "False", "Attaching")
    assert progress is not None, seen.conditions
    assert progress - seen.first_allocated_at <= 3.0, seen.conditions
    assert seen.bound_at is not None
    assert seen.bound_at - seen.first_allocated_at <= 12.5, seen
    node = w.pinned_node(claim)
    assert node is not None, "bindsToNode pins the allocation to one node"
    assert pod["spec"]["nodeName"] == node
    ready = w.entry_condition(claim, w.FABRIC, w.ATTACHED)
    assert ready is not None
    assert ready["reason"] == "Attached"
    # 1.37.2 sets no metadata.generation on claims: observedGeneration is then 0 (omitted).
    assert ready.get("observedGeneration", 0) == claim["metadata"].get("generation", 0)
    assert ready["lastTransitionTime"]
    assert f"attached to node {node} by policy e2e-fabric" in ready["message"]
    for failure in (w.ATTACH_FAILED, w.ATTACH_TIMEOUT):
        cond = w.entry_condition(claim, w.FABRIC, failure)
        assert cond is not None
        assert cond["status"] == "False", cond
    (record,) = w.records_of(api, claim["metadata"]["uid"])
    assert record["metadata"]["name"].startswith("da-")
    assert record["status"]["phase"] == "Attached"
    assert (record["spec"]["node"], record["spec"]["nodeSource"]) == (node, "Allocation")
    assert w.inventory(api)[record["metadata"]["name"]]["node"] == node
    # The attacher's field manager owns status.devices only, never allocation or reservedFor.
    owned = w.managed_field_paths(claim)
    assert owned == {f"{w.MANAGER_PREFIX}{w.FABRIC}": {"f:status/f:devices"}}, owned
    wait_for(
        lambda: (
            {"AttachStarted", "Attached"} <= w.reasons(w.events_for(api, namespace, "ResourceClaim", "ok"))
        ),
        10,
        "AttachStarted and Attached on the claim",
    )
    wait_for(
        lambda: (
            {"BindingConditionsPending", "Attached"}
            <= w.reasons(w.events_for(api, namespace, "Pod", "ok-pod"))
        ),
        10,
        "BindingConditionsPending and Attached on the pod",
    )


def _check_failure_then_retry(api: Kube, namespace: str, seen: w.Seen, taints: dict[str, str]) -> None:
    """Scenario 2 and 2b: AttachFailed, the scheduler unreserves and deallocates, the failed device
    is tainted, and a new allocation (a new allocationTimestamp, so a new attachment key) of
    another device attaches and binds."""
    wait_for(lambda: api.get(w.pod_path(namespace, "fail-pod"))["spec"].get("nodeName"), 40, "fail-pod bound")
    assert len(seen.stamps) >= 2, seen.stamps
    assert seen.first(w.ATTACH_FAILED, "True", "AttachFailed") is not None, seen.conditions
    assert any("device binding failed: claim=fail, reason=AttachFailed" in m for m in seen.pod_messages), (
        seen.pod_messages
    )
    claim = api.get(w.claim_path(namespace, "fail"))
    assert w.allocation_stamp(claim) == seen.stamps[-1]
    ready = w.entry_condition(claim, w.FABRIC, w.ATTACHED)
    assert ready is not None
    assert ready["status"] == "True"
    (current,) = w.records_of(api, claim["metadata"]["uid"])
    assert seen.records[current["metadata"]["name"]] == seen.stamps[-1]
    (old,) = [k for k, stamp in seen.records.items() if stamp == seen.stamps[0]]
    assert old != current["metadata"]["name"], "a new allocation gets a new attachment key"
    first = wait_for(
        lambda: w.inventory(api)[old]["state"] == "detached" and w.inventory(api)[old], 10, "old detached"
    )
    assert first["detachCalls"] == 1, first
    (failed_device,) = seen.devices[seen.stamps[0]]
    (final_device,) = seen.devices[seen.stamps[-1]]
    assert failed_device in taints.values(), (failed_device, taints)
    assert final_device != failed_device, "the tainted device is not picked again"
    claim_events = w.reasons(w.events_for(api, namespace, "ResourceClaim", "fail"))
    assert {"AttachFailed", "Detached", "Attached"} <= claim_events, claim_events


def _check_timeout(api: Kube, namespace: str, seen: w.Seen) -> None:
    """Scenario 3: AttachTimeout at T0 + 22 s (bindingTimeout 30 s - safetyMargin 8 s), the
    scheduler's message carries our reason, and the unused allocation is detached at once."""
    wait_for(lambda: seen.first(w.ATTACH_TIMEOUT, "True", "AttachTimeout"), 40, "AttachTimeout on claim hang")
    assert seen.first_allocated_at is not None
    written = seen.first(w.ATTACH_TIMEOUT, "True", "AttachTimeout")
    assert written is not None
    assert 19.0 <= written - seen.first_allocated_at <= 25.0, (
        written - seen.first_allocated_at,
        seen.conditions,
    )
    wait_for(
        lambda: any(
            "device binding failed: claim=hang, reason=AttachTimeout" in m for m in seen.pod_messages
        ),
        15,
        "the scheduler to report AttachTimeout",
    )
    assert seen.bound_at is None, "a pod whose attach timed out must not be bound"
    first_stamp = seen.stamps[0]
    wait_for(
        lambda: (
            any(
                v["state"] == "detached" and v["detachCalls"] == 1 and v["attachCalls"] == 1
                for v in w.inventory(api).values()
            )
            or None
        ),
        5,
        f"the timed-out attachment of allocation {first_stamp} to be detached",
    )
    assert "AttachTimeout" in w.reasons(w.events_for(api, namespace, "ResourceClaim", "hang"))


def _check_two_drivers(api: Kube, namespace: str, seen: w.Seen, restricted: str) -> None:
    """Scenario 7 and 7b: each driver's entries under its own field manager; the pod binds only
    after both attacher-managed drivers and the harness-managed foreign driver are True."""
    status_path = w.claim_path(namespace, "two") + "/status"
    wait_for(lambda: w.allocation_stamp(api.get(w.claim_path(namespace, "two"))), 20, "claim two allocated")
    api.apply(status_path, _foreign_entry(api.get(w.claim_path(namespace, "two")), "False"), "e2e-foreign")
    both = {(w.FABRIC, w.ATTACHED): "True", (w.NIC, w.LINKED): "True"}
    claim = w.wait_entry_status(api, namespace, "two", both, 20)
    fabric_at = seen.wait_first(w.ATTACHED, "True", "Attached")
    nic_at = seen.wait_first(w.LINKED, "True", "Attached")
    assert nic_at > fabric_at, "nic (4 s) becomes ready after fabric (2 s), each on its own"
    owned = w.managed_field_paths(claim)
    assert set(owned) == {f"{w.MANAGER_PREFIX}{w.FABRIC}", f"{w.MANAGER_PREFIX}{w.NIC}"}, owned
    for entry in claim["metadata"]["managedFields"]:
        manager = entry["manager"]
        devices = entry.get("fieldsV1", {}).get("f:status", {}).get("f:devices", {})
        keys = [k for k in devices if k.startswith("k:")]
        if manager.startswith(w.MANAGER_PREFIX):
            driver = manager.removeprefix(w.MANAGER_PREFIX)
            assert keys, manager
            assert all(f'"driver":"{driver}"' in k for k in keys), (manager, keys)
    foreign = w.entry_condition(claim, w.FOREIGN, w.FOREIGN_READY)
    assert foreign is not None
    assert foreign["reason"] == "HarnessWaiting", "the attacher never touches the foreign entry"
    # The scheduler polls every 5 s: with only our entries True, a poll must not bind the pod.
    with pytest.raises(WaitTimeout):
        w.wait_bound(api, namespace, "two-pod", 6)
    # §2.6: what the API server answers when the attacher's identity writes a driver it may not.
    sa = Kube(restricted)
    try:
        with pytest.raises(ApiError) as refused:
            sa.apply(status_path, _foreign_entry(claim, "True"), "probe")
    finally:
        sa.close()
    print(f"driver-permission denial: HTTP {refused.value.status}: {refused.value.message}")
    assert refused.value.status in (403, 422), refused.value
    assert 'resource="resourceclaims/driver"' in refused.value.message, refused.value.message
    assert "arbitrary-node:patch" in refused.value.message, refused.value.message
    api.apply(status_path, _foreign_entry(claim, "True"), "e2e-foreign")
    pod = w.wait_bound(api, namespace, "two-pod", 15)
    assert pod["spec"]["nodeName"] == w.pinned_node(claim)
    final = w.entry_condition(api.get(w.claim_path(namespace, "two")), w.FOREIGN, w.FOREIGN_READY)
    assert final is not None
    assert final["reason"] == "HarnessReady"


def _check_inventory_after_cleanup(api: Kube) -> None:
    entries = {**w.inventory(api), **w.inventory(api, w.NIC_INVENTORY)}
    assert entries
    assert all(v["state"] == "detached" for v in entries.values()), entries
    assert all(v["detachCalls"] == 1 for v in entries.values()), entries


def _check_metrics(text: str) -> None:
    name = "dra_operators_bindingattacher_attachments_total"
    assert w.metric(text, name, driver=w.FABRIC, outcome="ready") == 3  # ok, fail (2nd), two
    assert w.metric(text, name, driver=w.NIC, outcome="ready") == 1
    assert w.metric(text, name, driver=w.FABRIC, outcome="failed") >= 1
    assert w.metric(text, name, driver=w.FABRIC, outcome="timeout") >= 1
    assert w.metric(text, "dra_operators_bindingattacher_budget_exhausted_total", driver=w.FABRIC) >= 1
    assert w.metric(text, "dra_operators_bindingattacher_time_to_ready_seconds_count", driver=w.FABRIC) == 3
    writes = "dra_operators_bindingattacher_claim_status_writes_total"
    assert w.metric(text, writes, result="ok") > 0
    for refused in ("forbidden", "invalid"):
        assert w.metric(text, writes, result=refused) == 0
    assert w.metric(text, "dra_operators_bindingattacher_test_action_calls_total", operation="detach") > 0
    assert w.metric(text, "dra_operators_workqueue_adds_total", name=OPERATOR) > 0


def test_restart_mid_attach_completes_exactly_once(
    api: Kube,
    namespace: str,
    world: w.World,
    run_attacher: Callable[..., Any],
    clean_slate: list[str],
) -> None:
    """Scenario 6a: SIGKILL while the attach call runs; the restarted attacher finds the record
    in Attaching, calls attach again with the same key, and the pod binds before T0 + 22 s."""
    _standard_policies(api, clean_slate)
    slow = {"test.dra-operators.io/attach-delay": "8s"}
    with w.Observer(api, namespace, {"slow": "slow-pod"}) as seen:
        with run_attacher() as first:
            _wait_standard_policies(api)
            _claim_and_pod(api, namespace, "slow", [("gpu", w.class_name("ba", w.FABRIC))], slow)
            (record,) = wait_for(lambda: w.records(api), 20, "the record of claim slow")
            key = record["metadata"]["name"]
            wait_for(
                lambda: w.inventory(api).get(key, {}).get("attachCalls") == 1, 10, "the first attach call"
            )
            assert record["status"]["phase"] == "Attaching"
            first.kill()
        assert w.records(api)[0]["status"]["phase"] == "Attaching", "the intent survives the crash"
        with run_attacher() as second:
            w.wait_bound(api, namespace, "slow-pod", 25)
            observed = seen.seen["slow"]
            wait_for(lambda: observed.bound_at, 2, "the observer to see the binding")
            assert observed.first_allocated_at is not None
            assert observed.bound_at is not None
            assert observed.bound_at - observed.first_allocated_at < 22.5
            entry = w.inventory(api)[key]
            assert (entry["attachCalls"], entry["state"]) == (2, "attached"), entry
            (only,) = w.records(api)
            assert only["metadata"]["name"] == key
            claim = api.get(w.claim_path(namespace, "slow"))
            assert len(claim["status"]["devices"]) == 1
            _delete_all(api, namespace, ["slow"])
            wait_for(lambda: not w.records(api), 30, "the record to be detached and deleted")
            assert w.inventory(api)[key]["detachCalls"] == 1
            assert "dra_operators_bindingattacher_attachments_total" in second.metrics()


def test_bad_policies(
    api: Kube,
    namespace: str,
    world: w.World,
    run_attacher: Callable[..., Any],
    clean_slate: list[str],
) -> None:
    """Scenario 8: every problem is a clear condition on the policy, and nothing is acted on."""
    # 8a: admission names the field and the pattern.
    bad_reason = w.policy_body(
        "bad-reason", w.NIC, action={"kind": "Noop"}, conditions={"reasons": {"failed": "attach-failed"}}
    )
    with pytest.raises(ApiError) as rejected:
        api.create(w.POLICIES, bad_reason)
    assert rejected.value.status == 422
    assert "spec.conditions.reasons.failed" in rejected.value.message, rejected.value.message
    assert "[A-Za-z]" in rejected.value.message, rejected.value.message
    # 8f: safetyMargin larger than half the bindingTimeout.
    _create_policy(
        api,
        clean_slate,
        w.testaction_policy("bad-nic", w.NIC, "1s", w.NIC_INVENTORY, safetyMargin="20s"),
    )
    # 8b: an entry point nobody installed, for the foreign driver.
    _create_policy(
        api,
        clean_slate,
        w.policy_body(
            "bad-python", w.FOREIGN, action={"kind": "Python", "python": {"entryPoint": "does-not-exist"}}
        ),
    )
    # 8d: a driver that the installation's RBAC does not list.
    _create_policy(
        api,
        clean_slate,
        w.policy_body("no-rbac", "other.attach-test.dra-operators.io", action={"kind": "Noop"}),
    )
    with run_attacher():
        expect = {
            "bad-nic": ("Accepted", "InvalidSpec", "spec.safetyMargin"),
            "bad-python": ("Accepted", "UnknownEntryPoint", "dra_operators.attach_actions"),
            "no-rbac": ("Authorized", "MissingDriverPermission", "resourceclaims/driver"),
        }
        for name, (type_, reason, words) in expect.items():
            cond = w.wait_policy_condition(api, name, type_, reason, 20)
            assert cond["status"] == "False", cond
            assert words in cond["message"], cond
            assert w.policy_condition(api, name, "Ready")["status"] == "False"
        assert "does-not-exist" in w.policy_condition(api, "bad-python", "Accepted")["message"]
        # 8c: a second policy for the same driver is refused; the first is unaffected.
        _create_policy(api, clean_slate, w.testaction_policy("dup-nic", w.NIC, "1s", w.NIC_INVENTORY))
        dup = w.wait_policy_condition(api, "dup-nic", "Accepted", "DuplicateDriver", 20)
        assert "bad-nic" in dup["message"]
        assert w.policy_condition(api, "bad-nic", "Accepted")["reason"] == "InvalidSpec"
        # Nothing is acted on: pods with devices of not-Ready policies get no record and no entry.
        _claim_and_pod(api, namespace, "nic", [("nic", w.class_name("ba", w.NIC))])
        _claim_and_pod(api, namespace, "ext", [("ext", w.class_name("ba", w.FOREIGN))])
        for claim in ("nic", "ext"):
            w.wait_event(api, namespace, "ResourceClaim", claim, "AttachPolicyNotReady", 20)
        with pytest.raises(WaitTimeout):
            wait_for(
                lambda: w.records(api) or w.entry(api.get(w.claim_path(namespace, "nic")), w.NIC),
                3,
                "any record or entry while the policies are not Ready",
            )
        # 8g: fixing the spec makes the policy Ready within 10 s and the waiting pod binds.
        api.patch(f"{w.POLICIES}/bad-nic", {"spec": {"safetyMargin": "8s"}})
        wait_for(lambda: w.policy_ready(api, "bad-nic"), 10, "bad-nic to become Ready")
        conditions = api.get(f"{w.POLICIES}/bad-nic")["status"]["conditions"]
        assert all(c["status"] == "True" for c in conditions), conditions
        w.wait_bound(api, namespace, "nic-pod", 25)
        assert not w.entry(api.get(w.claim_path(namespace, "ext")), w.FOREIGN)
        # 11 (first half): the driver permission is withdrawn from a Ready policy. The refused
        # apply is reported on the claim and the policy, and Authorized turns False.
        api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{w.DRIVER_ROLE}")
        try:
            _claim_and_pod(api, namespace, "nic2", [("nic", w.class_name("ba", w.NIC))])
            w.wait_event(api, namespace, "ResourceClaim", "nic2", "StatusWriteForbidden", 20)
            w.wait_policy_condition(api, "bad-nic", "Authorized", "MissingDriverPermission", 20)
            assert "StatusWriteForbidden" in w.reasons(
                w.events_for(api, "default", "DeviceAttachPolicy", "bad-nic")
            )
        finally:
            w.grant_drivers(api)
        _delete_all(api, namespace, ["nic", "ext", "nic2"])
        wait_for(lambda: not w.records(api), 30, "the ledger to be empty")
    # 8e: the Test action needs --enable-test-actions.
    with run_attacher(("--binding-timeout", w.BINDING_TIMEOUT)):
        w.wait_policy_condition(api, "bad-nic", "Accepted", "TestActionDisabled", 20)
