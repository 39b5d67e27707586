"""``onFailure.taintDevice`` writes DeviceTaintRules as whichever version the cluster serves (``v1`` in
1.37, ``v1beta2`` in 1.36, ``v1alpha3`` in 1.35), found by the runtime's discovery
(``OperatorDefinition.discovered``); where none is served, nothing is tainted and the policies'
``Accepted`` condition says so (:data:`operators.bindingattacher.policy.TAINT_INACTIVE`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bindingattacher_builders import attacher

from operators.bindingattacher.controller import BindingAttacherController
from operators.bindingattacher.operator import DEFINITION
from operators.core.client import ApiError
from operators.core.namespace import Presence
from operators.dra import taintrules
from operators.dra.pools import DeviceId

CLAIMS = {"name": "resourceclaims", "kind": "ResourceClaim", "namespaced": True}
RULES = {"name": "devicetaintrules", "kind": "DeviceTaintRule", "namespaced": False}
OWN = [
    {"name": "deviceattachpolicies", "kind": "DeviceAttachPolicy", "namespaced": False},
    {"name": "deviceattachments", "kind": "DeviceAttachment", "namespaced": True},
]
DEVICE = DeviceId("fabric.example.com", "fabric-pool", "f0")


class DiscoveryClient:
    """Discovery from a table of group versions; creates and lists recorded."""

    def __init__(self, rule_version: str | None) -> None:
        self.documents: dict[str, list[dict[str, Any]]] = {
            "/apis/resource.k8s.io/v1": [CLAIMS],
            "/apis/dra-operators.io/v1alpha1": OWN,
        }
        if rule_version is not None:
            path = f"/apis/resource.k8s.io/{rule_version}"
            self.documents[path] = [*self.documents.get(path, []), RULES]
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.listed: list[str] = []

    async def get(self, path: str, **params: str) -> Any:
        if path in self.documents:
            return {"resources": self.documents[path]}
        if path.endswith("/devicetaintrules"):
            self.listed.append(path)
            return {"items": []}
        raise ApiError(404, "NotFound", path)

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        self.created.append((path, body))
        return body


def declared(client: DiscoveryClient) -> BindingAttacherController:
    controller = attacher(client, Presence.PRESENT)
    controller.runtime.kinds = DEFINITION.kinds
    return controller


async def prepared(client: DiscoveryClient) -> BindingAttacherController:
    controller = declared(client)
    # What the runtime does before the watches: discovery, then prepare().
    assert await controller.runtime.prepare()
    return controller


def test_the_definition_discovers_every_rule_version() -> None:
    (discovered,) = DEFINITION.discovered
    assert (discovered.plural, discovered.versions) == (taintrules.PLURAL, taintrules.VERSIONS)


@pytest.mark.parametrize("version", taintrules.VERSIONS)
async def test_failure_taints_are_written_as_the_served_version(version: str) -> None:
    client = DiscoveryClient(version)
    controller = await prepared(client)
    assert controller.shared.taint_rules_served()
    await controller.shared.kube.taints.taint(DEVICE, "AttachFailed", "fabric", timedelta(minutes=10))
    ((path, body),) = client.created
    assert path == f"/apis/resource.k8s.io/{version}/devicetaintrules"
    assert body["apiVersion"] == f"resource.k8s.io/{version}"
    assert body["kind"] == "DeviceTaintRule"
    await controller.shared.kube.taints.sweep()
    assert client.listed == [path]


async def test_without_any_version_nothing_is_tainted_and_policies_are_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = DiscoveryClient(None)
    controller = await prepared(client)
    assert not controller.shared.taint_rules_served()
    assert "no version of resource.k8s.io serves devicetaintrules (asked for v1, v1beta2, v1alpha3)" in (
        caplog.text
    )
    await controller.shared.kube.taints.taint(DEVICE, "AttachFailed", "fabric", timedelta(minutes=10))
    await controller.shared.kube.taints.sweep()
    assert (client.created, client.listed) == ([], [])


async def test_claims_policies_and_records_are_required(caplog: pytest.LogCaptureFixture) -> None:
    client = DiscoveryClient("v1")
    client.documents["/apis/dra-operators.io/v1alpha1"] = OWN[:1]
    controller = declared(client)
    assert not await controller.runtime.prepare()
    assert "required APIs are not served: deviceattachments in dra-operators.io/v1alpha1; not ready" in (
        caplog.text
    )
    assert not controller.shared.taint_rules_served(), "prepare() waits for the required kinds"
    client.documents["/apis/dra-operators.io/v1alpha1"] = OWN
    assert await controller.runtime.prepare()
    assert controller.shared.taint_rules_served()
