"""The shared Pod projection: what every pod-watching operator reads of a pod, and only that."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from operators.dra import pods


def _pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}, "managedFields": [{}]},
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "image": "img"}],
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "nic", "resourceClaimName": "shared-nic"},
            ],
        },
        "status": {"phase": "Running", **status},
    }


def test_reads_claim_references_and_their_statuses() -> None:
    pod = pods.Pod.model_validate(
        _pod(
            resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "p-gpu-x"}, {"name": "nic"}],
            extendedResourceClaimStatus={"resourceClaimName": "p-extended", "requestMappings": []},
        )
    )
    assert (pod.name, pod.namespace, pod.uid, pod.key) == ("p", "ns", "u", ("ns", "p"))
    assert pod.spec.node_name == "node-1"
    assert [
        (e.name, e.resource_claim_name, e.resource_claim_template_name) for e in pod.spec.resource_claims
    ] == [
        ("gpu", None, "one-gpu"),
        ("nic", "shared-nic", None),
    ]
    assert [(s.name, s.resource_claim_name) for s in pod.status.resource_claim_statuses] == [
        ("gpu", "p-gpu-x"),
        ("nic", None),
    ]
    assert pod.extended_claim_name == "p-extended"


def test_keeps_nothing_an_operator_must_ask_for() -> None:
    """Phase, conditions, labels and containers are not shared: an operator that reads one adds it."""
    text = pods.Pod.model_validate(_pod(conditions=[{"type": "Ready"}])).model_dump_json(by_alias=True)
    for unread in ("Running", "Ready", "labels", "containers", "managedFields", "img"):
        assert unread not in text


def test_null_and_absent_lists_read_as_empty() -> None:
    body = _pod(resourceClaimStatuses=None)
    body["spec"]["resourceClaims"] = None
    pod = pods.Pod.model_validate(body)
    assert pod.spec.resource_claims == ()
    assert pod.status.resource_claim_statuses == ()
    assert pod.extended_claim_name == ""
    bare = pods.Pod.model_validate({"metadata": {"name": "p"}})
    assert (bare.spec.node_name, bare.spec.resource_claims, bare.extended_claim_name) == ("", (), "")


@pytest.mark.parametrize(
    "body",
    [
        {"spec": {}},
        {"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"resourceClaimName": "c"}]}},
        {"metadata": {"name": "p"}, "status": {"resourceClaimStatuses": [{"resourceClaimName": "c"}]}},
        {"metadata": {"name": "p"}, "spec": {"nodeName": None}},
    ],
)
def test_a_pod_without_a_required_field_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        pods.Pod.model_validate(body)


class _PhaseStatus(pods.PodStatus):
    phase: str = ""


class _PhasePod(pods.Pod):
    status: _PhaseStatus = _PhaseStatus()


def test_an_operator_adds_what_only_it_reads() -> None:
    pod = _PhasePod.model_validate(_pod(extendedResourceClaimStatus={"resourceClaimName": "x"}))
    assert pod.status.phase == "Running"
    assert pod.extended_claim_name == "x"
    assert _PhasePod.model_validate({"metadata": {"name": "p"}}).status.phase == ""
