"""``kubectl dra explain`` against the real control plane (issue #27): the four situations, each set
up with real objects, and the plugin's answer read back as a document.

Explain only reads, so no operator runs here: a claim reserved for a pod that is gone stays so only
while nothing releases it, which is exactly the situation to explain. The claims are allocated by
writing their status as an administrator, as kube-scheduler would (see e2e/devicetaint/world.py).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.bindingattacher.world import install_crds, policy_body
from e2e.devicetaint.world import RESOURCE, World, open_world
from e2e.support import Tracker
from operators.dra.attachments import LABEL_POLICY, POLICY_FINALIZER, RECORD_FINALIZER

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def world(api: Kube, objects: Tracker, namespace: str, unique_name: Callable[[str], str]) -> Iterator[World]:
    with open_world(api, objects, unique_name("node"), namespace) as opened:
        yield opened


def explain(cluster: harness.Cluster, kind: str, name: str, namespace: str) -> list[str]:
    done = cluster.kubectl_dra("explain", kind, name, "-n", namespace, "-o", "json")
    assert done.returncode == 0, done.stderr
    return [finding["text"] for finding in json.loads(done.stdout)["findings"]]


def test_explain_claims_and_pods(
    cluster: harness.Cluster,
    api: Kube,
    world: World,
    namespace: str,
    driver_name: str,
    unique_name: Callable[[str], str],
) -> None:
    pool = world.node
    world.resource_slice(unique_name("slice"), driver_name, pool, ["gpu-0", "gpu-1"])
    device_class = unique_name("class")
    world.objects.device_class(device_class, driver_name)
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"

    # 1. Not allocated: it asks for two devices of the class while another claim holds one of them.
    world.claim("holder", driver_name, pool, ["gpu-0"])
    api.create(
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "big"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": 2}}]
                }
            },
        },
    )
    world.pod("waiter", ["big"], bound=False)
    assert explain(cluster, "claim", "big", namespace) == [
        "It is not allocated; 1 pod waits for it (waiter).",
        f"request gpu (exactly) asks DeviceClass {device_class} for 2 devices: 2 published devices match the "
        f"class and selectors; 1 in use by other claims ({driver_name}/{pool}/gpu-0 by {namespace}/holder); "
        "1 free: not enough for 2 devices.",
    ]

    # 2. Allocated, and the device waits for its binding condition.
    world.claim("attach", driver_name, pool, ["gpu-1"], allocate=False)
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "req-0",
                        "driver": driver_name,
                        "pool": pool,
                        "device": "gpu-1",
                        "bindingConditions": ["Attached"],
                        "bindingFailureConditions": ["AttachFailed"],
                    }
                ]
            },
            "allocationTimestamp": "2026-12-03T09:00:00Z",
        },
        "devices": [
            {
                "driver": driver_name,
                "pool": pool,
                "device": "gpu-1",
                "conditions": [
                    {
                        "type": "Attached",
                        "status": "False",
                        "reason": "Busy",
                        "message": "fabric busy, retrying",
                        "lastTransitionTime": "2026-12-03T09:00:01Z",
                    }
                ],
            }
        ],
    }
    api.patch(f"{claims}/attach/status", {"status": status})
    assert explain(cluster, "claim", "attach", namespace) == [
        f"It is allocated: {driver_name}/{pool}/gpu-1.",
        f"The pod waits for {driver_name}/{pool}/gpu-1 to report Attached since 2026-12-03T09:00:00Z; "
        "the attacher's last word: fabric busy, retrying.",
    ]

    # 3 and 4. Deleted while reserved for a pod that is gone: the finalizer holds it.
    gone = world.pod("gone", ["stuck"])
    api.create(
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "stuck", "finalizers": [DELETE_PROTECTION]},
            "spec": {
                "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": device_class}}]}
            },
        },
    )
    world.allocate("stuck", driver_name, pool, ["gpu-1"], [gone])
    world.force_delete_pod("gone")
    api.delete(f"{claims}/stuck")
    wait_for(
        lambda: api.get(f"{claims}/stuck")["metadata"].get("deletionTimestamp"),
        30,
        "the claim to be deleting",
    )
    found = explain(cluster, "claim", "stuck", namespace)
    assert found[0].startswith("It is being deleted since ")
    assert found[0].endswith(f"and is held by the finalizers {DELETE_PROTECTION}.")
    assert found[1:] == [
        f"{DELETE_PROTECTION} stays while the claim is reserved: it still has 1 consumer (see below); the "
        "resourceclaim controller releases consumers that are gone or done, then deallocates and removes the "
        "finalizer.",
        "It is reserved for pod gone, which no longer exists.",
        f"It is allocated: {driver_name}/{pool}/gpu-1.",
    ]

    # A pod: its own state, then each claim.
    pod_findings = explain(cluster, "pod", "waiter", namespace)
    assert pod_findings[0] == "It is Pending, not scheduled yet."
    assert "Claim dev-0 is ResourceClaim big:" in pod_findings
    assert "It is not allocated; 1 pod waits for it (waiter)." in pod_findings

    # Clean-up of what no controller releases here.
    api.patch(f"{claims}/stuck", {"metadata": {"finalizers": []}})


def test_explain_names_the_way_out_of_the_attacher_finalizers_only_when_it_is_gone(
    cluster: harness.Cluster, api: Kube, namespace: str, unique_name: Callable[[str], str]
) -> None:
    """A DeviceAttachPolicy and its record, each held by the attacher's finalizer, with no attacher
    running (this namespace stands for the operators' one). Explain names the commands; running
    them exactly as printed ends both deletions. With a Lease renewed as a running attacher renews
    it, explain names none."""
    install_crds(cluster, api)
    name = unique_name("policy")
    policies = "/apis/dra-operators.io/v1alpha1/deviceattachpolicies"
    records = f"/apis/dra-operators.io/v1alpha1/namespaces/{namespace}/deviceattachments"
    record = "da-e2e-explain"
    try:
        body = policy_body(name, "gpu.example.com", action={"kind": "Noop"})
        body["metadata"]["finalizers"] = [POLICY_FINALIZER]
        api.create(policies, body)
        api.create(
            records,
            {
                "apiVersion": "dra-operators.io/v1alpha1",
                "kind": "DeviceAttachment",
                "metadata": {
                    "name": record,
                    "labels": {LABEL_POLICY: name},
                    "finalizers": [RECORD_FINALIZER],
                },
                "spec": {
                    "claim": {
                        "namespace": namespace,
                        "name": "gpu",
                        "uid": "0b0b0b0b-0000-4000-8000-000000000000",
                    },
                    "allocationTimestamp": "2026-12-04T09:00:00Z",
                    "driver": "gpu.example.com",
                    "pool": "pool-a",
                    "device": "gpu-0",
                    "policy": {"name": name},
                    "deadline": "2026-12-04T09:10:00Z",
                },
            },
        )
        api.delete(f"{policies}/{name}")
        api.delete(f"{records}/{record}")

        said = explain(cluster, "policy", name, namespace)
        assert said[0] == "It has 1 DeviceAttachment (Pending 1)."
        assert f"held by the finalizers {POLICY_FINALIZER}" in said[1]
        assert said[3].startswith("The binding attacher does not run here: it has no Lease")
        commands = re.findall(r"`(kubectl patch [^`]+)`", said[4])
        assert len(commands) == 2, said[4]
        assert explain(cluster, "attachment", record, namespace)[-1] == said[4].replace(
            f"; `{commands[1]}`", ""
        )

        # A running attacher: its Lease held and just renewed. The way out is not offered.
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        api.create(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "dra-operators-bindingattacher"},
                "spec": {"holderIdentity": "attacher-e2e", "leaseDurationSeconds": 60, "renewTime": now},
            },
        )
        running = explain(cluster, "policy", name, namespace)
        assert running[3].startswith("The binding attacher runs: attacher-e2e holds its Lease")
        assert not any("kubectl patch" in line for line in running)

        for command in commands:
            cluster.kubectl(*shlex.split(command)[1:])
        wait_for(lambda: api.get_or_none(f"{records}/{record}") is None, 30, "the record to be deleted")
        wait_for(lambda: api.get_or_none(f"{policies}/{name}") is None, 30, "the policy to be deleted")
    finally:
        # Whatever happened above, leave no cluster-scoped object held for ever.
        for path in (f"{records}/{record}", f"{policies}/{name}"):
            if api.get_or_none(path) is not None:
                api.patch(path, {"metadata": {"finalizers": None}})
