"""Projections of watched objects and the bodies built from them."""

from __future__ import annotations

from resourceclaim_builders import claim_body, make_pod, make_template, pod_body

from operators.resourceclaim.bodies import generated_claim, pod_owner
from operators.resourceclaim.models import Pod, ResourceClaim


def test_claim_keeps_raw_body_without_managed_fields() -> None:
    body = claim_body("c", allocated=True)
    claim = ResourceClaim.from_body(body)
    assert "managedFields" not in claim.body["metadata"]
    assert claim.body["metadata"]["resourceVersion"] == "42"
    assert claim.is_allocated
    body["status"]["allocation"] = None
    assert claim.body["status"]["allocation"] is not None
    assert "raw_json" not in claim.model_dump()
    # Every read is a private copy: a write built from it cannot change the cache.
    claim.body["metadata"]["resourceVersion"] = "changed"
    assert claim.body["metadata"]["resourceVersion"] == "42"
    assert not ResourceClaim.from_body(claim_body("d")).is_allocated


def test_pod_projection_reads_claims_and_statuses() -> None:
    pod = make_pod(
        claims=[{"name": "gpu", "resourceClaimTemplateName": "t"}],
        statuses=[{"name": "gpu", "resourceClaimName": "c"}],
        node_name="n",
        extended_claim="ext",
    )
    assert (pod.name, pod.namespace, pod.uid) == ("my-pod", "demo", "U")
    assert pod.spec.resource_claims[0].resource_claim_template_name == "t"
    assert pod.status.resource_claim_statuses[0].resource_claim_name == "c"
    assert pod.extended_claim_name == "ext"
    assert make_pod().extended_claim_name == ""


def test_null_lists_read_as_empty() -> None:
    body = pod_body()
    body["spec"]["resourceClaims"] = None
    body["status"]["resourceClaimStatuses"] = None
    pod = Pod.model_validate(body)
    assert pod.spec.resource_claims == ()
    assert pod.status.resource_claim_statuses == ()


def test_nested_nulls_read_as_absent() -> None:
    """Beyond the shared projections' rule (a null list is empty), every null below the pod's or
    the claim's spec and status reads as absent here: a watch handler must not fail on one."""
    body = pod_body(claims=[{"name": "gpu", "resourceClaimTemplateName": "t"}], extended_claim="ext")
    body["spec"]["nodeName"] = None
    body["spec"]["resourceClaims"][0]["resourceClaimName"] = None
    body["status"]["phase"] = None
    body["status"]["extendedResourceClaimStatus"]["resourceClaimName"] = None
    pod = Pod.model_validate(body)
    assert (pod.spec.node_name, pod.status.phase, pod.extended_claim_name) == ("", "", "")
    assert pod.spec.resource_claims[0].resource_claim_template_name == "t"
    claim = claim_body("c", reserved_for=[{"resource": "pods", "name": "p", "uid": "U"}], spec=None)
    claim["status"]["reservedFor"][0]["apiGroup"] = None
    claim["status"]["allocation"] = None
    parsed = ResourceClaim.from_body(claim)
    assert [(c.api_group, c.name, c.is_pod) for c in parsed.status.reserved_for] == [("", "p", True)]
    assert not parsed.is_allocated
    assert not parsed.admin_access


def test_template_projection_ignores_null_creation_timestamp() -> None:
    template = make_template()
    assert template.spec.metadata.labels == {"app": "demo"}
    assert template.spec.spec["devices"]["requests"][0]["name"] == "req-0"


def test_each_generated_claim_gets_a_spec_of_its_own() -> None:
    template = make_template()
    pod = make_pod()
    first = generated_claim(pod_owner(pod), pod.namespace, "gpu", template)
    first["spec"]["devices"]["requests"][0]["name"] = "changed"
    second = generated_claim(pod_owner(pod), pod.namespace, "gpu", template)
    assert second["spec"] == template.spec.spec
    assert template.spec.spec["devices"]["requests"][0]["name"] == "req-0"
