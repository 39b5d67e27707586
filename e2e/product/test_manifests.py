"""The documented install, `kubectl apply -k manifests/`, is accepted by a real 1.37 apiserver
for the base and every overlay (server-side dry run: admission, schemas and CRDs included)."""

from __future__ import annotations

import pytest
import yaml

from devcluster.constants import REPO_ROOT
from e2e import harness
from operators import OPERATOR_NAMES

OVERLAYS = ["manifests", "manifests/overlays/dev", "manifests/overlays/ha", "manifests/overlays/managed"]


@pytest.fixture(scope="module")
def operator_namespace(cluster: harness.Cluster) -> str:
    # A dry run creates nothing, so the namespaced objects need the namespace to exist for real.
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "manifests/namespace/namespace.yaml"))
    return "dra-operators"


@pytest.mark.parametrize("target", OVERLAYS)
def test_apply_dry_run(cluster: harness.Cluster, operator_namespace: str, target: str) -> None:
    result = cluster.kubectl("apply", "-k", str(REPO_ROOT / target), "--dry-run=server", timeout=120)
    assert "(server dry run)" in result.stdout
    kinds = {line.split("/", 1)[0] for line in result.stdout.splitlines()}
    assert "deployment.apps" in kinds
    assert "customresourcedefinition.apiextensions.k8s.io" in kinds


def test_deployments_follow_the_restricted_profile(cluster: harness.Cluster) -> None:
    rendered = cluster.kubectl("kustomize", str(REPO_ROOT / "manifests")).stdout
    deployments = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    assert len(deployments) == len(OPERATOR_NAMES)
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert isinstance(pod["securityContext"]["runAsUser"], int)
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        container = pod["containers"][0]
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"]
        assert container["resources"]["limits"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["args"][:2] == ["run", deployment["metadata"]["name"].removeprefix("dra-operators-")]
