"""The binding attacher next to the in-tree resourceclaim controller (spec bindingattacher §23,
scenarios 1, 5a, 5b and 9), on the upstream-mode devcluster, where claims are generated from
templates and deallocated when their last consumer goes: detach follows the allocation, not
the pod.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.kube import Kube, WaitTimeout, wait_for
from e2e import harness
from e2e.bindingattacher import world as w
from e2e.support import Tracker

pytestmark = [pytest.mark.differential, pytest.mark.devcluster_only, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def upstream_world(upstream_cluster: harness.Cluster, upstream_api: Kube) -> Iterator[str]:
    if upstream_cluster.binding_timeout != w.BINDING_TIMEOUT:
        pytest.skip(f"needs kube-scheduler bindingTimeout {w.BINDING_TIMEOUT}")
    w.install_crds(upstream_cluster, upstream_api)
    kubeconfig = w.restricted_kubeconfig(upstream_cluster, upstream_api)
    tracker = Tracker(upstream_api)
    w.build_world(tracker, "bu")
    yield kubeconfig
    w.remove_policies(upstream_api, ["e2e-fabric", "e2e-nic"])
    w.clear_ledger(upstream_api)
    w.clear_inventories(upstream_api)
    w.clear_taint_rules(upstream_api)
    tracker.cleanup()


def _template(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": w.class_name("bu", w.FABRIC)}}
                    ]
                }
            }
        },
    }


def _generated_claim(api: Kube, namespace: str, pod: str) -> str:
    def name() -> Any:
        statuses = api.get(w.pod_path(namespace, pod)).get("status", {}).get("resourceClaimStatuses") or []
        return statuses[0].get("resourceClaimName") if statuses else None

    claim: str = wait_for(name, 30, f"the claim generated for pod {pod}")
    return claim


def _key_of(api: Kube, claim: dict[str, Any]) -> str:
    (record,) = w.records_of(api, claim["metadata"]["uid"])
    assert record["status"]["phase"] == "Attached", record["status"]
    name: str = record["metadata"]["name"]
    return name


def test_template_and_shared_claims_detach_when_the_allocation_ends(
    upstream_cluster: harness.Cluster,
    upstream_api: Kube,
    upstream_world: str,
    upstream_namespace: str,
) -> None:
    api, ns = upstream_api, upstream_namespace
    api.create(w.POLICIES, w.fabric_policy())
    api.create(f"{w.RESOURCE}/namespaces/{ns}/resourceclaimtemplates", _template(ns))
    shared = w.claim_body("shared", [("gpu", w.class_name("bu", w.FABRIC))])
    with harness.operator_running(
        "bindingattacher", upstream_world, upstream_cluster.workdir, "subprocess", w.ARGS
    ) as op:
        w.wait_policy_ready(api, "e2e-fabric", 20)
        api.create(w.pod_path(ns), w.pod_body("tmpl-pod", {"dev": {"resourceClaimTemplateName": "gpu"}}))
        api.create(w.claim_path(ns), shared)
        api.create(w.pod_path(ns), w.pod_body("first", {"dev": {"resourceClaimName": "shared"}}))
        generated = _generated_claim(api, ns, "tmpl-pod")
        # Scenario 1 with a template: the generated claim is attached and the pod binds.
        w.wait_bound(api, ns, "tmpl-pod", 20)
        tmpl_claim = w.wait_entry_status(api, ns, generated, {(w.FABRIC, w.ATTACHED): "True"}, 5)
        tmpl_key = _key_of(api, tmpl_claim)
        # Scenario 9: a late second consumer of a ready claim binds with no second attach.
        w.wait_bound(api, ns, "first", 20)
        shared_claim = api.get(w.claim_path(ns, "shared"))
        shared_key = _key_of(api, shared_claim)
        api.create(w.pod_path(ns), w.pod_body("second", {"dev": {"resourceClaimName": "shared"}}))
        w.wait_bound(api, ns, "second", 10)
        assert w.inventory(api)[shared_key]["attachCalls"] == 1
        assert [r["metadata"]["name"] for r in w.records_of(api, shared_claim["metadata"]["uid"])] == [
            shared_key
        ]

        # Scenario 5a: deleting the pod makes the controller deallocate and delete the generated
        # claim; the attacher detaches within 10 s and deletes its record.
        api.delete(w.pod_path(ns, "tmpl-pod"), gracePeriodSeconds="0")
        wait_for(
            lambda: api.get_or_none(w.claim_path(ns, generated)) is None, 30, "the generated claim to go"
        )
        wait_for(lambda: w.inventory(api)[tmpl_key]["state"] == "detached", 10, "the template claim's detach")
        wait_for(lambda: not w.records_of(api, tmpl_claim["metadata"]["uid"]), 10, "its record to go")
        assert w.inventory(api)[tmpl_key]["detachCalls"] == 1
        detached = w.events_for(api, ns, "ResourceClaim", generated) + w.events_for(
            api, w.OPERATOR_NS, "DeviceAttachment", tmpl_key
        )
        assert "Detached" in w.reasons(detached), w.reasons(detached)

        # Scenario 5b: one consumer of two goes: nothing is detached ...
        api.delete(w.pod_path(ns, "first"), gracePeriodSeconds="0")
        with pytest.raises(WaitTimeout):
            wait_for(lambda: w.inventory(api)[shared_key]["state"] == "detached", 4, "no detach while in use")
        # ... the last one goes: the controller deallocates, and the attacher detaches once.
        api.delete(w.pod_path(ns, "second"), gracePeriodSeconds="0")
        wait_for(lambda: w.inventory(api)[shared_key]["state"] == "detached", 15, "the shared claim's detach")
        wait_for(lambda: not w.records(api), 10, "the ledger to be empty")
        assert api.get(w.claim_path(ns, "shared"))["status"].get("allocation") is None
        # Deleting the deallocated claim changes nothing further.
        api.delete(w.claim_path(ns, "shared"))
        wait_for(lambda: api.get_or_none(w.claim_path(ns, "shared")) is None, 15, "the shared claim to go")
        entry = w.inventory(api)[shared_key]
        assert (entry["attachCalls"], entry["detachCalls"]) == (1, 1), entry
        text = op.metrics()
    detaches = "dra_operators_bindingattacher_detaches_total"
    assert w.metric(text, detaches, driver=w.FABRIC, reason="Deallocated", outcome="succeeded") >= 1
    assert w.metric(text, "dra_operators_bindingattacher_attachments_total", outcome="ready") == 2
