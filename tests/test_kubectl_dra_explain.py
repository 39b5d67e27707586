"""``kubectl dra explain``: the four situations of issue #27, each statement with its field."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from devicehealth_builders import gpu, rule_body

from operators.kubectl_dra.errors import PluginError
from operators.kubectl_dra.explain import ExplainQuery, document, render
from operators.kubectl_dra.explainmodel import Finding, Snapshot, explain_claim, explain_pod

pytestmark = pytest.mark.unit

NS = "ml"
DRIVER = "gpu.example.com"
TAINT = {"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}


def device(
    name: str, *, model: str = "a100", taints: list[dict[str, Any]] | None = None, counters: int = 0
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "attributes": {"model": {"string": model}}}
    if taints:
        body["taints"] = taints
    if counters:
        body["consumesCounters"] = [
            {"counterSet": "gpu-0", "counters": {"memory": {"value": f"{counters}Gi"}}}
        ]
    return body


def slice_body(*devices: dict[str, Any], shared: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": list(devices),
    }
    if shared:
        spec["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": f"{shared}Gi"}}}]
    return {"metadata": {"name": "node-1-gpus"}, "spec": spec}


def claim(
    name: str,
    *,
    count: int = 1,
    allocated: list[str] | None = None,
    reserved: list[dict[str, Any]] | None = None,
    deleting: bool = False,
    finalizers: list[str] | None = None,
    selectors: list[str] | None = None,
    binding: list[str] | None = None,
    device_conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T10:00:00Z"
    if finalizers:
        meta["finalizers"] = finalizers
    status: dict[str, Any] = {}
    if allocated is not None:
        results: list[dict[str, Any]] = [
            {"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": d} for d in allocated
        ]
        if binding:
            for result in results:
                result["bindingConditions"] = binding
                result["bindingFailureConditions"] = ["AttachFailed"]
        status["allocation"] = {
            "devices": {"results": results},
            "allocationTimestamp": "2026-12-03T09:00:00Z",
        }
    if reserved:
        status["reservedFor"] = reserved
    if device_conditions is not None:
        status["devices"] = [
            {"driver": DRIVER, "pool": "node-1", "device": d, "conditions": device_conditions}
            for d in allocated or []
        ]
    return {
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
        "status": status,
    }


def pod(name: str, claim_name: str, *, uid: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]},
        "status": {"phase": phase},
    }


def snapshot(
    *claims: dict[str, Any],
    pods: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
    slices: list[dict[str, Any]] | None = None,
    rules: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
) -> Snapshot:
    return Snapshot(
        claims={(NS, c["metadata"]["name"]): c for c in claims},
        pods={(NS, p["metadata"]["name"]): p for p in pods},
        slices=slices if slices is not None else [],
        classes={
            "gpu": {
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        },
        rules=list(rules),
    )


def texts(findings: list[Any]) -> list[str]:
    return [f.text for f in findings]


def test_unallocated_claim_says_why_each_device_cannot_be_had() -> None:
    devices = slice_body(
        device("gpu-0"),
        device("gpu-1", taints=[TAINT]),
        device("gpu-2", model="t4"),
        device("gpu-3", counters=40),
        device("gpu-4", counters=40),
        shared=60,
    )
    taken = claim("other", allocated=["gpu-0", "gpu-3"])
    wanted = claim("big", count=2, selectors=['device.attributes["gpu.example.com"].model == "a100"'])
    found = explain_claim(snapshot(wanted, taken, pods=[pod("trainer", "big")], slices=[devices]), NS, "big")
    assert texts(found) == [
        "It is not allocated; 1 pod waits for it (trainer).",
        "request gpu (exactly) asks DeviceClass gpu for 2 devices: 4 published devices match the class "
        "and selectors; 2 in use by other claims (gpu.example.com/node-1/gpu-0 by ml/other, "
        "gpu.example.com/node-1/gpu-3 by ml/other); 1 carries a taint the request does not tolerate "
        "(gpu.example.com/node-1/gpu-1: gpu.example.com/unhealthy=ecc:NoSchedule); "
        "1 lacks free shared counters (gpu.example.com/node-1/gpu-4); 0 free: not enough for 2 devices.",
    ]
    assert [f.source for f in found] == [
        "ResourceClaim ml/big .status.allocation",
        "ResourceClaim ml/big .spec.devices.requests[0].exactly",
    ]


def test_a_rule_taint_counts_and_an_unused_claim_is_named() -> None:
    rule = {
        "metadata": {"name": "r"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "device": "gpu-0"},
            "taint": {"key": "k", "effect": "NoExecute"},
        },
    }
    found = explain_claim(
        snapshot(claim("idle"), slices=[slice_body(device("gpu-0"))], rules=[rule]), NS, "idle"
    )
    assert found[0].text.startswith("It is not allocated, and no pod uses it")
    assert (
        "1 carries a taint the request does not tolerate (gpu.example.com/node-1/gpu-0: k=:NoExecute)"
        in found[1].text
    )


def test_allocated_claim_waiting_on_binding_conditions() -> None:
    waiting = claim(
        "attached",
        allocated=["gpu-0"],
        binding=["Attached"],
        device_conditions=[
            {"type": "Attached", "status": "False", "reason": "Busy", "message": "fabric busy, retrying"}
        ],
    )
    found = explain_claim(snapshot(waiting), NS, "attached")
    assert texts(found) == [
        "It is allocated: gpu.example.com/node-1/gpu-0.",
        "The pod waits for gpu.example.com/node-1/gpu-0 to report Attached since 2026-12-03T09:00:00Z; "
        "the attacher's last word: fabric busy, retrying.",
    ]
    assert ".bindingConditions" in found[1].source


def test_stuck_deleting_on_delete_protection_and_reserved_for_a_gone_pod() -> None:
    stuck = claim(
        "stuck",
        allocated=["gpu-0"],
        reserved=[
            {"resource": "pods", "name": "gone", "uid": "u-gone"},
            {"resource": "pods", "name": "old", "uid": "u-old"},
        ],
        deleting=True,
        finalizers=["resource.kubernetes.io/delete-protection"],
    )
    found = explain_claim(snapshot(stuck, pods=[pod("old", "stuck", uid="u-new")]), NS, "stuck")
    assert texts(found)[:4] == [
        "It is being deleted since 2026-12-03T10:00:00Z and is held by the finalizers "
        "resource.kubernetes.io/delete-protection.",
        "resource.kubernetes.io/delete-protection stays while the claim is reserved: it still has "
        "2 consumers (see below); the resourceclaim controller releases consumers that are gone or done, "
        "then deallocates and removes the finalizer.",
        "It is reserved for pod gone, which no longer exists.",
        "It is reserved for an earlier pod old (uid u-old); the pod of that name now is another one.",
    ]
    assert found[2].source == "ResourceClaim ml/stuck .status.reservedFor[0]"


def test_allocated_but_unreserved_while_deleting_points_at_the_controller() -> None:
    stuck = claim(
        "left", allocated=["gpu-0"], deleting=True, finalizers=["resource.kubernetes.io/delete-protection"]
    )
    found = explain_claim(snapshot(stuck), NS, "left")
    assert "should deallocate it and remove the finalizer: is it running?" in found[1].text


def test_pod_explains_each_claim_and_the_missing_template() -> None:
    waiting = {
        "metadata": {"name": "p", "namespace": NS, "uid": "u-p"},
        "spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimName": "idle"},
                {"name": "scratch", "resourceClaimTemplateName": "missing"},
            ]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/1 nodes are available"}],
        },
    }
    found = explain_pod(snapshot(claim("idle"), pods=[waiting]), NS, "p")
    assert texts(found)[:4] == [
        "It is Pending, not scheduled yet.",
        "kube-scheduler says: 0/1 nodes are available",
        "Claim gpu is ResourceClaim idle:",
        "It is not allocated; 1 pod waits for it (p).",
    ]
    assert texts(found)[-1] == (
        "Claim scratch has not been created from template missing yet, "
        "and ResourceClaimTemplate missing does not exist."
    )
    assert explain_pod(snapshot(), NS, "nope")[0].text == "Pod ml/nope does not exist."


# --- device health (issue #41) ---------------------------------------------------------------------

SIGNAL = {"key": "gpu.example.com/health", "value": "Unhealthy", "effect": "None"}
POLICY_RULE = rule_body(gpu("node-1", "gpu-1"), time_added=datetime(2026, 12, 3, 9, 30, tzinfo=UTC))


def reporting_pod(claim_name: str, reports: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    body = pod("trainer", claim_name, phase="Running")
    body["spec"]["nodeName"] = "node-1"
    body["status"]["containerStatuses"] = [
        {
            "name": "main",
            "allocatedResourcesStatus": [{"name": name, "resources": r} for name, r in reports.items()],
        }
    ]
    return body


def test_a_pod_shows_each_devices_health_under_its_claim_and_the_bad_ones_stand_out() -> None:
    running = reporting_pod(
        "two",
        {
            "claim:gpu": [
                {"resourceID": f"{DRIVER}/node-1/gpu-0", "health": "Healthy"},
                {"resourceID": f"{DRIVER}/node-1/gpu-1", "health": "Unhealthy", "message": "ECC errors"},
                {"resourceID": "vendor.com/gpu=2", "health": "Unknown"},
            ]
        },
    )
    found = explain_pod(snapshot(claim("two", allocated=["gpu-0", "gpu-1"]), pods=[running]), NS, "trainer")
    assert [(f.text, f.warning) for f in found] == [
        ("It is Running on node node-1.", False),
        ("Claim gpu is ResourceClaim two:", False),
        ("It is allocated: gpu.example.com/node-1/gpu-0, gpu.example.com/node-1/gpu-1.", False),
        ("Container main: gpu.example.com/node-1/gpu-0 is Healthy.", False),
        ("Container main: gpu.example.com/node-1/gpu-1 is Unhealthy: ECC errors.", True),
        (
            "Container main: vendor.com/gpu=2 (no single device of ResourceClaim two) is Unknown: "
            "the kubelet has no recent report from the driver.",
            True,
        ),
    ]
    assert found[3].source == (
        "Pod ml/trainer .status.containerStatuses[main].allocatedResourcesStatus[claim:gpu]"
    )
    assert found[4].to_dict()["warning"] is True
    assert "warning" not in found[3].to_dict()


def test_a_pod_without_health_reports_says_nothing_new() -> None:
    quiet = reporting_pod("one", {})
    del quiet["status"]["containerStatuses"]
    found = explain_pod(snapshot(claim("one", allocated=["gpu-0"]), pods=[quiet]), NS, "trainer")
    assert texts(found) == [
        "It is Running on node node-1.",
        "Claim gpu is ResourceClaim one:",
        "It is allocated: gpu.example.com/node-1/gpu-0.",
    ]


def test_an_allocated_device_shows_signals_apart_from_the_taint_a_health_policy_wrote() -> None:
    devices = slice_body(device("gpu-0", taints=[SIGNAL]), device("gpu-1", taints=[TAINT]))
    held = claim("held", allocated=["gpu-0", "gpu-1"])
    found = explain_claim(snapshot(held, slices=[devices], rules=[POLICY_RULE]), NS, "held")
    assert [(f.text, f.source, f.warning) for f in found[1:]] == [
        (
            "gpu.example.com/node-1/gpu-0 has signal: gpu.example.com/health=Unhealthy "
            "(None: informational, blocks nothing).",
            "ResourceSlice node-1-gpus .spec.devices[gpu-0].taints",
            False,
        ),
        (
            "gpu.example.com/node-1/gpu-1 has gpu.example.com/unhealthy=ecc:NoSchedule: "
            "it takes no new claims; this one keeps it.",
            "ResourceSlice node-1-gpus .spec.devices[gpu-1].taints",
            False,
        ),
        (
            "gpu.example.com/node-1/gpu-1 has dra-operators.io/device-health=Unhealthy:NoExecute "
            "(DeviceHealthPolicy gpu-health): the claim does not tolerate it, so its pods are evicted.",
            "DeviceTaintRule gpu-health-2816155260d0 .spec.taint",
            True,
        ),
    ]


def test_a_tolerated_noexecute_taint_says_until_when() -> None:
    held = claim("held", allocated=["gpu-1"])
    held["status"]["allocation"]["devices"]["results"][0]["tolerations"] = [
        {"key": "dra-operators.io/device-health", "operator": "Exists", "tolerationSeconds": 600}
    ]
    found = explain_claim(
        snapshot(held, slices=[slice_body(device("gpu-1"))], rules=[POLICY_RULE]), NS, "held"
    )
    assert found[-1].text.endswith(
        "the claim tolerates it until 2026-12-03T09:40:00Z, then its pods are evicted."
    )
    offset_rule = copy.deepcopy(POLICY_RULE)
    offset_rule["spec"]["taint"]["timeAdded"] = "2026-12-03T11:30:00+02:00"
    found = explain_claim(
        snapshot(held, slices=[slice_body(device("gpu-1"))], rules=[offset_rule]), NS, "held"
    )
    assert found[-1].text.endswith("until 2026-12-03T09:40:00Z, then its pods are evicted."), "in UTC"
    del held["status"]["allocation"]["devices"]["results"][0]["tolerations"][0]["tolerationSeconds"]
    found = explain_claim(
        snapshot(held, slices=[slice_body(device("gpu-1"))], rules=[POLICY_RULE]), NS, "held"
    )
    assert (found[-1].text.endswith("the claim tolerates it."), found[-1].warning) == (True, False)


def test_an_unallocated_request_names_signals_and_the_policy_behind_a_blocking_taint() -> None:
    devices = slice_body(device("gpu-0", taints=[SIGNAL]), device("gpu-1"))
    found = explain_claim(snapshot(claim("idle"), slices=[devices], rules=[POLICY_RULE]), NS, "idle")
    assert found[1].text == (
        "request gpu (exactly) asks DeviceClass gpu for 1 device: 2 published devices match the class and "
        "selectors; 1 carries a taint the request does not tolerate (gpu.example.com/node-1/gpu-1: "
        "dra-operators.io/device-health=Unhealthy:NoExecute (DeviceHealthPolicy gpu-health)); 1 free; "
        "gpu.example.com/node-1/gpu-0 has signal: gpu.example.com/health=Unhealthy "
        "(None: informational, blocks nothing)."
    )


def test_a_warning_is_marked_in_the_text_and_in_the_document() -> None:
    query = ExplainQuery("pod", NS, "trainer")
    findings = [Finding("fine.", "here"), Finding("bad.", "there", warning=True)]
    assert render(query, findings) == (
        "Pod ml/trainer:\n- fine.\n    from here\n- warning: bad.\n    from there\n"
    )
    assert document(query, findings)["findings"] == [
        {"text": "fine.", "source": "here"},
        {"text": "bad.", "source": "there", "warning": True},
    ]


def test_counters_too_far_apart_to_subtract_are_named_instead_of_guessed() -> None:
    devices = slice_body(device("gpu-3", counters=1), device("gpu-4", counters=1))
    devices["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "1e2147483647"}}}]
    taken = claim("other", allocated=["gpu-3"])
    with pytest.raises(PluginError, match="counter memory of counter set gpu-0 in pool node-1 of driver"):
        explain_claim(snapshot(claim("big"), taken, slices=[devices]), NS, "big")
