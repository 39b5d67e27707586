"""The attacher's ResourceClaim and Pod are the shared projections of operators.dra, read as the
attacher always read them: what the shared projections accept more leniently is still refused, and
a consumer pod is readable whatever shape its claim references have."""

from __future__ import annotations

from typing import Any

import pytest
from bindingattacher_builders import FABRIC, claim_body, result
from pydantic import ValidationError

from operators.bindingattacher.cache import project_claim
from operators.bindingattacher.models import Pod, ResourceClaim
from operators.dra import claims, pods


def test_the_claim_and_pod_are_the_shared_projections() -> None:
    the_claim = project_claim(
        claim_body([result()]), keep_test_annotations=False, configured_drivers=[FABRIC]
    )
    assert isinstance(the_claim, claims.ResourceClaim)
    assert the_claim.key == ("team-a", "trainer-0-gpu")
    [consumer] = the_claim.status.reserved_for
    assert consumer.is_pod
    assert isinstance(Pod.model_validate({"metadata": {"name": "p"}}), pods.Pod)


@pytest.mark.parametrize(
    "change",
    [
        lambda status: status.update(reservedFor=None),
        lambda status: status.update(devices=None),
        lambda status: status["allocation"]["devices"].update(results=None),
        lambda status: status["reservedFor"][0].pop("name"),
        lambda status: status["reservedFor"][0].pop("uid"),
        lambda status: status["reservedFor"][0].pop("resource"),
    ],
)
def test_what_the_attacher_always_refused_is_still_refused(change: Any) -> None:
    body = claim_body([result()])
    change(body["status"])
    with pytest.raises(ValidationError):
        ResourceClaim.model_validate(body)


def test_a_missing_or_null_namespace_and_node_name_read_as_blank() -> None:
    body = claim_body([result()])
    body["metadata"]["namespace"] = None
    assert ResourceClaim.model_validate(body).metadata.namespace == ""
    pod = Pod.model_validate({"metadata": {"uid": "u", "namespace": None}, "spec": {"nodeName": None}})
    assert (pod.metadata.name, pod.metadata.namespace, pod.spec.node_name) == ("", "", "")


def test_a_pods_claim_references_are_not_read() -> None:
    pod = Pod.model_validate(
        {
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"nodeName": "node-a", "resourceClaims": [{"resourceClaimName": "no-name"}]},
            "status": {
                "nominatedNodeName": "node-b",
                "resourceClaimStatuses": "unexpected",
                "extendedResourceClaimStatus": {"resourceClaimName": None},
            },
        }
    )
    assert (pod.spec.node_name, pod.status.nominated_node_name) == ("node-a", "node-b")
    assert pod.spec.resource_claims == ()
