from __future__ import annotations

import pytest
import yaml

from operators.kubectl_dra import cli, grants
from operators.kubectl_dra.errors import EXIT_USAGE, UsageError

pytestmark = pytest.mark.unit


def test_the_grant_is_the_driver_subresource_for_the_attacher() -> None:
    role, binding = grants.driver_grant("gpu.fabric.example.com", "dra")
    assert role["metadata"]["name"] == "dra-operators-bindingattacher-driver-gpu.fabric.example.com"
    assert role["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims/driver"],
            "resourceNames": ["gpu.fabric.example.com"],
            "verbs": ["arbitrary-node:patch"],
        }
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-operators-bindingattacher", "namespace": "dra"}
    ]
    for document in (role, binding):
        assert document["metadata"]["labels"]["app.kubernetes.io/part-of"] == "dra-operators"


@pytest.mark.parametrize("driver", ["", "Gpu.Example.com", "a_b", "x" * 64, "-a.example.com"])
def test_a_malformed_driver_is_a_usage_error(driver: str) -> None:
    with pytest.raises(UsageError):
        grants.driver_grant(driver, "dra-operators")


def test_output_prints_the_documents_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["grant-driver", "fabric.example.com", "-o", "yaml"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents] == ["ClusterRole", "ClusterRoleBinding"]
    assert cli.main(["grant-driver", "Not_A_Driver", "-o", "yaml"]) == EXIT_USAGE
    assert "is not a driver name" in capsys.readouterr().err
