"""The chart's copies of what the repository keeps once: Helm installs ``crds/`` of the chart as
plain files, so they are copies of ``crds/``, and they must never drift; and the one version of
everything a release ships (RELEASE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "dra-operators"


def test_the_chart_crds_are_the_project_crds() -> None:
    project = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.dra-operators.io.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert project, "no CRDs found"
    assert chart == project, "copy crds/*.dra-operators.io.yaml to charts/dra-operators/crds/"


def test_the_chart_version_and_app_version_follow_the_package() -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = (CHART / "Chart.yaml").read_text()
    assert f"version: {version}\n" in chart
    assert f'appVersion: "{version}"\n' in chart


def test_the_python_distributions_take_the_package_version() -> None:
    """The operators' package, ``--version`` and the kubectl-dra distribution (plugin/, version
    read from operators.__version__ at build time) carry the one version."""
    import tomllib

    import operators
    from devcluster import dist

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert operators.__version__ == version
    plugin = tomllib.loads((ROOT / "plugin" / "pyproject.toml").read_text())
    assert "version" not in plugin["project"]
    assert plugin["project"]["dynamic"] == ["version"]
    assert plugin["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "operators.__version__"}
    assert dist.krew_manifest(ROOT / "LICENSE", version)["spec"]["version"] == f"v{version}"


def test_the_chart_monitoring_files_are_the_kustomize_ones() -> None:
    for name in ("podmonitor.yaml", "prometheusrule.yaml", "dashboard.json"):
        assert (CHART / "files" / name).read_bytes() == (
            ROOT / "manifests" / "monitoring" / name
        ).read_bytes(), f"copy manifests/monitoring/{name} to charts/dra-operators/files/"


def test_the_kustomize_base_installs_the_package_version() -> None:
    import tomllib

    import yaml

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    common = yaml.safe_load((ROOT / "manifests" / "common" / "kustomization.yaml").read_text())
    assert common["images"] == [{"name": "dra-operators", "newTag": version}]


def test_the_chart_installs_on_the_oldest_kubernetes_the_operators_accept() -> None:
    """Helm refuses an older cluster before anything is applied; the operators and kubectl dra
    refuse it at start (operators.core.serverversion), and the two minimums are one."""
    from operators.core.serverversion import MINIMUM

    major, minor = MINIMUM
    chart = (CHART / "Chart.yaml").read_text()
    assert f'kubeVersion: ">={major}.{minor}.0-0"\n' in chart
