"""The projections that the caches of the pod-watching operators hold (issue #23): every field a
sync reads survives parsing, and whatever else a real object carries is not kept."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from operators.devicetaint import models as devicetaint
from operators.resourceclaim import models as resourceclaim


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": "ml",
            "uid": "u-1",
            "resourceVersion": "42",
            "deletionTimestamp": "2026-12-03T08:00:00Z",
            "labels": {"app": "trainer"},
            "annotations": {"note": "x" * 1000},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-1"}],
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "futureField": {"anything": True},
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "image": "img", "env": [{"name": "A", "value": "b" * 500}]}],
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "nic", "resourceClaimName": "shared-nic"},
            ],
            "futureSpecField": [1, 2, 3],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager"},
            ],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-0-gpu-abcde"}],
            "extendedResourceClaimStatus": {"resourceClaimName": "trainer-0-extended-xyz"},
            "containerStatuses": [{"name": "c", "ready": True}],
        },
    }


def _claim() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "trainer-0-gpu-abcde",
            "namespace": "ml",
            "uid": "c-1",
            "resourceVersion": "43",
            "creationTimestamp": "2026-12-03T07:00:00Z",
            "labels": {"team": "a"},
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu", "unrelated": "y" * 1000},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "trainer-0", "uid": "u-1", "controller": True}
            ],
            "managedFields": [{"manager": "dra-operators-resourceclaim", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
                    ]
                },
                "nodeSelector": {"nodeSelectorTerms": []},
            },
            "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "u-1"}],
            "devices": [
                {
                    "driver": "gpu.example.com",
                    "pool": "node-1",
                    "device": "gpu-0",
                    "data": {"big": "z" * 1000},
                }
            ],
        },
    }


def _kept_text(model: BaseModel) -> str:
    # An unset optional field is a shared None: it costs no memory per object (tracemalloc shows
    # the same bytes per resourceclaim Pod with and without spec.schedulingGroup modelled).
    return model.model_dump_json(by_alias=True, exclude_none=True)


def test_resourceclaim_pod_keeps_what_its_syncs_read() -> None:
    pod = resourceclaim.Pod.model_validate(_pod())
    assert (pod.namespace, pod.name, pod.uid) == ("ml", "trainer-0", "u-1")
    assert pod.metadata.deletion_timestamp == "2026-12-03T08:00:00Z"
    assert pod.metadata.owner_references[0].uid == "j-1"
    assert pod.spec.node_name == "node-1"
    assert [
        (e.name, e.resource_claim_template_name, e.resource_claim_name) for e in pod.spec.resource_claims
    ] == [
        ("gpu", "one-gpu", None),
        ("nic", None, "shared-nic"),
    ]
    assert pod.status.phase == "Running"
    assert [(s.name, s.resource_claim_name) for s in pod.status.resource_claim_statuses] == [
        ("gpu", "trainer-0-gpu-abcde")
    ]
    assert pod.extended_claim_name == "trainer-0-extended-xyz"


def test_devicetaint_pod_keeps_what_its_syncs_read() -> None:
    pod = devicetaint.Pod.model_validate(_pod())
    assert pod.key == ("ml", "trainer-0")
    assert pod.metadata.uid == "u-1"
    assert pod.uses_claims
    assert pod.claim_inputs() == (
        "node-1",
        pod.status.resource_claim_statuses,
        "trainer-0-extended-xyz",
    )
    assert [c.type for c in pod.status.conditions] == ["DisruptionTarget"]
    assert pod.status.conditions[0].reason == "DeletionByDeviceTaintManager"


def test_resourceclaim_claim_keeps_what_its_syncs_read() -> None:
    claim = resourceclaim.ResourceClaim.from_body(_claim())
    assert (claim.namespace, claim.name, claim.uid) == ("ml", "trainer-0-gpu-abcde", "c-1")
    assert claim.metadata.resource_version == "43"
    assert claim.metadata.creation_timestamp == "2026-12-03T07:00:00Z"
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim.metadata.controller is not None
    assert claim.metadata.controller.uid == "u-1"
    assert claim.admin_access
    assert claim.is_allocated
    assert [(r.resource, r.name, r.uid) for r in claim.status.reserved_for] == [("pods", "trainer-0", "u-1")]
    # The full-object writes start from the raw body, which keeps everything but managedFields.
    body = claim.body
    assert "managedFields" not in body["metadata"]
    assert body["status"]["devices"][0]["data"] == {"big": "z" * 1000}


def test_devicetaint_claim_keeps_what_its_syncs_read() -> None:
    claim = devicetaint.ResourceClaim.model_validate(_claim())
    assert claim.key == ("ml", "trainer-0-gpu-abcde")
    assert [(r.driver, r.pool, r.device) for r in claim.results] == [("gpu.example.com", "node-1", "gpu-0")]
    assert claim.reserved_pod_names() == {"trainer-0"}


def test_projections_keep_nothing_unread() -> None:
    """Unknown fields, labels, other annotations, managed fields, containers and device data are
    dropped at parse time: they are most of a real object's size."""
    pod, claim = _pod(), _claim()
    for kept in (
        resourceclaim.Pod.model_validate(pod),
        devicetaint.Pod.model_validate(pod),
        resourceclaim.ResourceClaim.from_body(claim),
        devicetaint.ResourceClaim.model_validate(claim),
    ):
        text = _kept_text(kept)
        for unread in ("futureField", "futureSpecField", "kubectl", "image", "Ready", "unrelated", "team"):
            assert unread not in text, (type(kept).__module__, unread)
        assert "x" * 100 not in text
        assert "b" * 100 not in text
        assert "z" * 100 not in text
        assert kept.model_extra is None
    assert len(_kept_text(resourceclaim.Pod.model_validate(pod))) < len(json.dumps(pod)) / 4
