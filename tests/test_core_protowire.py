"""Protobuf edits that keep every other byte: the claim writes JSON cannot make.

The claim in tests/data was read from kube-apiserver v1.37.2 in both forms; its parameters were
created as ``{"b": 1, "a": "x"}`` (with spaces), which kube-apiserver serves as JSON without them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, cast

import pytest

from operators.core import protowire
from operators.core.client import ApiError, KubeClient
from operators.dra import claimwire
from operators.resourceclaim.claim_sync import resend_as_protobuf

FIXTURE = json.loads((Path(__file__).parent / "data" / "claim-shared-spaced.json").read_text())
ENVELOPE = base64.b64decode(FIXTURE["protobuf_base64"])
AS_JSON: dict[str, Any] = FIXTURE["json"]
SPEC, STATUS, METADATA = 2, 3, 1


def stored() -> bytes:
    return protowire.unwrap(ENVELOPE)[2]


def test_the_envelope_names_the_object_and_is_written_the_same_way() -> None:
    api_version, kind, message = protowire.unwrap(ENVELOPE)
    assert (api_version, kind) == ("resource.k8s.io/v1", "ResourceClaim")
    assert protowire.encode(protowire.parse(message)) == message
    assert protowire.unwrap(protowire.wrap(api_version, kind, message)) == (api_version, kind, message)


def test_the_stored_parameters_are_the_bytes_the_client_sent() -> None:
    assert b'{"b": 1, "a": "x"}' in protowire.values(stored(), SPEC)[0]


def test_releasing_one_of_two_consumers_changes_only_reserved_for() -> None:
    intended = json.loads(json.dumps(AS_JSON))
    gone, staying = intended["status"]["reservedFor"]
    intended["status"]["reservedFor"] = [staying]
    written = claimwire.written_as(stored(), intended)
    assert protowire.values(written, SPEC) == protowire.values(stored(), SPEC)
    assert protowire.values(written, METADATA) == protowire.values(stored(), METADATA)
    status = protowire.values(written, STATUS)[0]
    consumers = protowire.values(status, 2)
    assert [protowire.text(c, 5) for c in consumers] == [staying["uid"]]
    assert protowire.values(status, 1) == protowire.values(protowire.values(stored(), STATUS)[0], 1)
    assert gone["uid"] != staying["uid"]


def test_deallocating_and_dropping_the_finalizer() -> None:
    intended = json.loads(json.dumps(AS_JSON))
    intended["status"] = {"reservedFor": []}
    intended["metadata"]["finalizers"] = []
    written = claimwire.written_as(stored(), intended)
    assert protowire.values(written, SPEC) == protowire.values(stored(), SPEC)
    assert protowire.values(protowire.values(written, STATUS)[0], 1) == []
    assert protowire.values(protowire.values(written, STATUS)[0], 2) == []
    assert protowire.values(protowire.values(written, METADATA)[0], 14) == []
    assert protowire.text(protowire.values(written, METADATA)[0], 1) == AS_JSON["metadata"]["name"]


def test_a_new_consumer_is_written_from_its_json_entry() -> None:
    intended = json.loads(json.dumps(AS_JSON))
    entry = {"resource": "pods", "name": "late", "uid": "0f0f"}
    intended["status"]["reservedFor"].append(entry)
    status = protowire.values(claimwire.written_as(stored(), intended), STATUS)[0]
    added = protowire.values(status, 2)[-1]
    assert (protowire.text(added, 3), protowire.text(added, 4), protowire.text(added, 5)) == (
        "pods",
        "late",
        "0f0f",
    )


def test_a_write_based_on_another_version_is_refused() -> None:
    intended = json.loads(json.dumps(AS_JSON))
    intended["metadata"]["resourceVersion"] = "1"
    with pytest.raises(claimwire.StaleClaim):
        claimwire.written_as(stored(), intended)
    assert claimwire.resource_version(stored()) == AS_JSON["metadata"]["resourceVersion"]


def test_only_a_changed_spec_or_allocation_turns_to_protobuf() -> None:
    def refusal(field: str) -> dict[str, Any]:
        cause = {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: null: field is immutable",
            "field": field,
        }
        return {"kind": "Status", "reason": "Invalid", "details": {"causes": [cause]}}

    assert claimwire.refused_as_changed(refusal("spec"))
    assert claimwire.refused_as_changed(refusal("status.allocation"))
    assert not claimwire.refused_as_changed(refusal("status.reservedFor"))
    assert not claimwire.refused_as_changed({"reason": "Conflict"})


def test_malformed_input_is_an_error_not_a_guess() -> None:
    with pytest.raises(protowire.ProtobufError):
        protowire.parse(b"\x0a\x05ab")
    with pytest.raises(protowire.ProtobufError):
        protowire.unwrap(b"{}")


class ProtobufClient:
    """Serves the stored claim as protobuf and records the protobuf PUT."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def get_protobuf(self, path: str) -> bytes:
        self.calls.append(("GET", path, None))
        return ENVELOPE

    async def replace_protobuf(self, path: str, envelope: bytes, **params: str) -> Any:
        self.calls.append(("PUT", path, params))
        return {"written": protowire.unwrap(envelope)[2]}


REFUSED = ApiError(
    422,
    "Invalid",
    "spec: field is immutable",
    body={"reason": "Invalid", "details": {"causes": [{"field": "spec", "reason": "FieldValueInvalid"}]}},
)


async def test_a_claim_put_refused_as_changed_is_sent_again_as_protobuf() -> None:
    intended = json.loads(json.dumps(AS_JSON))
    intended["status"]["reservedFor"] = intended["status"]["reservedFor"][1:]
    client = ProtobufClient()
    path = "/apis/resource.k8s.io/v1/namespaces/demo/resourceclaims/shared/status"
    reply = await resend_as_protobuf(cast(KubeClient, client), "manager", path, intended, REFUSED)
    assert client.calls == [
        ("GET", path.removesuffix("/status"), None),
        ("PUT", path, {"fieldManager": "manager"}),
    ]
    assert reply == {"written": claimwire.written_as(stored(), intended)}


async def test_any_other_refusal_of_a_claim_put_is_raised() -> None:
    conflict = ApiError(409, "Conflict", "changed")
    with pytest.raises(ApiError) as raised:
        await resend_as_protobuf(cast(KubeClient, ProtobufClient()), "manager", "/x", AS_JSON, conflict)
    assert raised.value is conflict
