"""The one way request paths are built (operators.core.resources)."""

from __future__ import annotations

import pytest

from operators.core.discovery import ServedResource
from operators.core.resources import LEASES, NODES, PODS, ApiResource, InvalidPathSegment
from operators.dra.api import DEVICE_CLASSES, RESOURCE_CLAIMS

pytestmark = pytest.mark.unit


def test_core_kinds_live_under_api_and_the_others_under_apis() -> None:
    assert PODS.path("p", namespace="ns") == "/api/v1/namespaces/ns/pods/p"
    assert NODES.path("n") == "/api/v1/nodes/n"
    assert LEASES.path("l", namespace="ns") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
    assert PODS.api_version == "v1"
    assert RESOURCE_CLAIMS.api_version == "resource.k8s.io/v1"


def test_a_namespaced_collection_without_a_namespace_spans_all_namespaces() -> None:
    assert RESOURCE_CLAIMS.path() == "/apis/resource.k8s.io/v1/resourceclaims"
    assert RESOURCE_CLAIMS.path(namespace="ns") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"


def test_subresources_and_cluster_scoped_kinds() -> None:
    assert (
        RESOURCE_CLAIMS.path("c", namespace="ns", subresource="status")
        == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    )
    # A namespace given for a cluster-scoped kind is not part of its path.
    assert DEVICE_CLASSES.path("c", namespace="ns", subresource="status") == (
        "/apis/resource.k8s.io/v1/deviceclasses/c/status"
    )
    assert ApiResource("g", "v1", "things").path(subresource="status") == "/apis/g/v1/things"


def test_a_served_resource_builds_its_paths_the_same_way() -> None:
    served = ServedResource("resource.k8s.io", "v1beta2", "devicetaintrules", False, "DeviceTaintRule")
    assert served.path("r", subresource="status") == "/apis/resource.k8s.io/v1beta2/devicetaintrules/r/status"
    assert served.api_version == "resource.k8s.io/v1beta2"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a%2Fb", "a?watch=true", "a#b"])
def test_a_name_that_would_address_something_else_is_refused(name: str) -> None:
    with pytest.raises(InvalidPathSegment):
        PODS.path(name, namespace="ns")
    with pytest.raises(InvalidPathSegment):
        PODS.path("p", namespace=name)


def test_names_of_every_kind_requested_by_name_pass() -> None:
    assert PODS.path("web-0.v2", namespace="kube-system") == "/api/v1/namespaces/kube-system/pods/web-0.v2"
    # RBAC and a few other kinds allow colons and upper case; they are one segment all the same.
    assert NODES.path("system:Node") == "/api/v1/nodes/system:Node"
