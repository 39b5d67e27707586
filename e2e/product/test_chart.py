"""The Helm chart (``charts/dra-operators``): ``helm lint``, every profile rendered and accepted by
a real 1.37 apiserver (server-side dry run), the values schema refusing bad values, and the
default and managed profiles rendering exactly the objects of the kustomize base and overlay, and
the eviction guard exactly those of its component.
The real ``helm install`` is the managed profile's tier (``e2e/product/test_managed.py``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import build
from devcluster.constants import REPO_ROOT
from e2e import harness

CHART = REPO_ROOT / "charts" / "dra-operators"
NAMESPACE = "dra-operators"
# The chart's example values files (charts/dra-operators/examples/, named in its README), each a
# profile linted, rendered and dry-run applied below: an example the schema refuses fails here.
PROFILES: dict[str, list[str]] = {
    "default": [],
    **{path.stem: ["-f", str(path)] for path in sorted((CHART / "examples").glob("*.yaml"))},
}
# What differs by design: who manages the objects, and the chart's own label.
TOOL_LABELS = ("app.kubernetes.io/managed-by", "helm.sh/chart")


@pytest.fixture(scope="module")
def helm() -> str:
    return str(build.build_helm().directory / "helm")


def _helm(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, check=False)
    if check and done.returncode != 0:
        raise AssertionError(
            f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done


def _template(helm: str, values: Sequence[str]) -> str:
    return _helm(
        helm, "template", "dra-operators", str(CHART), "--namespace", NAMESPACE, "--include-crds", *values
    ).stdout


def _objects(rendered: str) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in yaml.safe_load_all(rendered):
        if not doc:
            continue
        labels = doc["metadata"].get("labels") or {}
        for label in TOOL_LABELS:
            labels.pop(label, None)
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in found, f"{key} rendered twice"
        found[key] = doc
    return found


def test_lint(helm: str) -> None:
    assert {"managed", "ha", "eviction-guard"} <= set(PROFILES)
    for values in PROFILES.values():
        done = _helm(helm, "lint", str(CHART), "--strict", *values)
        assert "0 chart(s) failed" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def operator_namespace(cluster: harness.Cluster) -> str:
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "manifests/namespace/namespace.yaml"))
    return NAMESPACE


@pytest.mark.parametrize("profile", list(PROFILES))
def test_each_profile_is_accepted_by_the_api_server(
    cluster: harness.Cluster, helm: str, operator_namespace: str, profile: str
) -> None:
    rendered = _template(helm, PROFILES[profile])
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, timeout=120)
    assert "(server dry run)" in result.stdout
    kinds = {line.split("/", 1)[0] for line in result.stdout.splitlines()}
    assert "deployment.apps" in kinds
    if profile == "ha":
        assert {"poddisruptionbudget.policy", "networkpolicy.networking.k8s.io"} <= kinds


def _kustomize(cluster: harness.Cluster, overlay: str, components: Sequence[str], directory: Path) -> str:
    """``overlay`` rendered, with ``components`` added the way docs/operate.md says: a kustomization of
    one's own that lists the overlay under resources and them under components."""
    if not components:
        return cluster.kubectl("kustomize", str(REPO_ROOT / overlay)).stdout
    # kustomize refuses absolute paths.
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT / overlay, directory)],
        "components": [os.path.relpath(REPO_ROOT / c, directory) for c in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return cluster.kubectl("kustomize", str(directory)).stdout


@pytest.mark.parametrize(
    ("profile", "overlay", "components"),
    [
        pytest.param("default", "manifests", [], id="default"),
        pytest.param("managed", "manifests/overlays/managed", [], id="managed"),
        pytest.param(
            "eviction-guard", "manifests", ["manifests/components/eviction-guard"], id="eviction-guard"
        ),
    ],
)
def test_the_chart_renders_what_kustomize_does(
    cluster: harness.Cluster, helm: str, profile: str, overlay: str, components: list[str], tmp_path: Path
) -> None:
    chart = _objects(_template(helm, PROFILES[profile]))
    kustomized = _objects(_kustomize(cluster, overlay, components, tmp_path))
    # Helm installs into a namespace that exists (--create-namespace); the base creates it.
    namespace = kustomized.pop(("Namespace", NAMESPACE))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert sorted(chart) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert chart[key] == obj, f"{key} differs"


def test_the_values_schema_refuses_what_would_not_work(helm: str) -> None:
    for values, complaint in (
        (["--set", "profile=cloud"], "profile"),
        (["--set", "replicas=0"], "replicas"),
        (["--set", "operators.bindingattacher.drivers[0]=Not_A_Driver"], "drivers"),
        (["--set-json", "operators.bindingattacher.drivers=[]"], "drivers"),
        (["--set", "operators.resourceclaim.extraArgs[0]=leader-elect"], "extraArgs"),
        (["--set", "operators.nosuch.enabled=true"], "nosuch"),
        (["--set", "evictionGuard.enabled=yes"], "evictionGuard"),
        (["--set", "image.digest=latest"], "digest"),
    ):
        done = _helm(helm, "template", "x", str(CHART), *values, check=False)
        assert done.returncode != 0, values
        assert "schema" in done.stderr, done.stderr
        assert complaint in done.stderr, done.stderr
    # No list at all (the default) grants no driver: each is granted by `kubectl dra grant-driver`.
    # RBAC would read a role without resourceNames as every driver, so none is rendered.
    for values in ([], ["--set", "operators.bindingattacher.drivers=null"]):
        objects = _objects(_template(helm, values))
        assert ("ClusterRole", "dra-operators-bindingattacher-drivers") not in objects, values
        assert ("ClusterRoleBinding", "dra-operators-bindingattacher-drivers") not in objects, values
        assert not any(
            "resourceclaims/driver" in rule.get("resources", [])
            for obj in objects.values()
            for rule in obj.get("rules", [])
        ), values


def test_values_reach_the_objects(helm: str) -> None:
    objects = _objects(
        _template(
            helm,
            [
                "--set",
                "operators.bindingattacher.drivers={gpu.example.com,nic.example.com}",
                "--set",
                "operators.taintselector.enabled=false",
                "--set",
                "image.repository=registry.example/dra-operators,image.tag=1.2.3,image.pullPolicy=Always",
                "--set",
                "operators.poolstatus.extraArgs[0]=--discovery-interval=5m",
                "--set",
                "operators.devicetaint.resources.limits.memory=1Gi",
                "--set",
                "priorityClassName=system-cluster-critical",
            ],
        )
    )
    (rule,) = objects[("ClusterRole", "dra-operators-bindingattacher-drivers")]["rules"]
    assert rule["resourceNames"] == ["gpu.example.com", "nic.example.com"]
    assert ("Deployment", "dra-operators-taintselector") not in objects
    assert ("ClusterRole", "dra-operators-taintselector") not in objects
    pool = objects[("Deployment", "dra-operators-poolstatus")]["spec"]["template"]["spec"]
    container = pool["containers"][0]
    assert container["image"] == "registry.example/dra-operators:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert container["args"][-1] == "--discovery-interval=5m"
    assert pool["priorityClassName"] == "system-cluster-critical"
    taint = objects[("Deployment", "dra-operators-devicetaint")]["spec"]["template"]["spec"]["containers"][0]
    assert taint["resources"] == {"limits": {"memory": "1Gi"}}


def test_the_chart_monitoring_is_what_kustomize_ships(cluster: harness.Cluster, helm: str) -> None:
    enabled = (
        "metrics.podMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true"
    )
    chart = _objects(_template(helm, ["--set", enabled]))
    kustomized = _objects(cluster.kubectl("kustomize", str(REPO_ROOT / "manifests" / "monitoring")).stdout)
    assert sorted(kustomized) == [
        ("ClusterRoleBinding", "dra-operators-metrics-scraper"),
        ("ConfigMap", "dra-operators-dashboard"),
        ("PodMonitor", "dra-operators"),
        ("PrometheusRule", "dra-operators"),
        ("Secret", "dra-operators-metrics-scraper"),
        ("ServiceAccount", "dra-operators-metrics-scraper"),
    ]
    for key, obj in kustomized.items():
        assert chart[key] == obj, f"{key} differs"


def test_an_image_digest_pins_every_operator_image(helm: str) -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    rendered = _objects(
        _template(
            helm,
            ["--set", "image.repository=registry.example/dra-operators", "--set", f"image.digest={digest}"],
        )
    )
    pinned = {
        obj["spec"]["template"]["spec"]["containers"][0]["image"]
        for (kind, _), obj in rendered.items()
        if kind == "Deployment"
    }
    assert pinned == {f"registry.example/dra-operators@{digest}"}
