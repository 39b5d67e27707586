"""The devcluster's versions and profiles: every component of an older version is built from its own
module beside the newest one, upstream's defaults name no gate and no runtime config, a
kube-controller-manager of each version is never handed a controller name it does not know, and a
running cluster of another version or profile is not reused. No process is started here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from devcluster_builders import LaunchRecorder

from devcluster import build, gomod, launcher, realnode
from devcluster.constants import (
    DEFAULT_MODE_CONTROLLERS,
    DRA_CONTROLLERS,
    FEATURE_GATES,
    check_profile,
    dra_controllers,
    feature_gates,
    kcm_controllers,
    runtime_config,
)
from devcluster.kind import kind_config
from e2e.product import matrix

INSTALL = Path(__file__).resolve().parents[1] / "docs" / "install.md"


def _options(tmp_path: Path, version: str, profile: str, upstream: bool = False) -> launcher.UpOptions:
    return launcher.UpOptions(
        directory=tmp_path / "cluster",
        binary_dir=tmp_path / "bin",
        k8s_version=version,
        etcd_version="v3.6.5",
        upstream_dra=upstream,
        profile=profile,
    )


def test_every_older_version_has_its_module_and_the_newest_is_go_mod() -> None:
    versions = build.supported_versions()
    assert versions[0] == build.NEWEST.version == "v1.37.2"
    assert set(versions) >= {"v1.35.4", "v1.36.3"}
    for version in versions[1:]:
        module = build.module(version)
        assert not module.newest
        assert module.version == version
        assert module.sumfile.is_file()
        assert module.go_flags() == [f"-modfile=versions/{version}.mod"]
        assert "./cmd/dra-test-driver" not in module.packages()
        assert "./cmd/kube-apiserver" in module.packages()
        # Its replaces are the published staging modules of the same version.
        staging = gomod.staging_version(version)
        replaces = gomod.current_replaces(module.modfile.read_text())
        assert replaces["k8s.io/api"] == f"k8s.io/api {staging}"


def test_a_version_without_a_module_is_named_with_the_ones_there_are() -> None:
    with pytest.raises(
        build.BuildError, match=r"K8S_VERSION=v1\.34\.4 .* builds v1\.37\.2, v1\.36\.3, v1\.35\.4"
    ):
        build.module("v1.34.4")


def test_the_newest_module_keeps_its_cache_key_inputs() -> None:
    """Labels of the newest module's inputs are the paths they always had, so its cache survives."""
    inputs = build.NEWEST.inputs()
    assert [p.name for p in inputs[:2]] == ["go.mod", "go.sum"]
    assert any(p.parent.name == "dra-test-driver" for p in inputs)
    assert not any(p.parent.name == "dra-test-driver" for p in build.module("v1.35.4").inputs())


def test_profiles_name_gates_only_in_the_lab() -> None:
    assert feature_gates(profile="defaults") == {}
    assert runtime_config(profile="defaults") == {}
    assert feature_gates(profile="lab") == FEATURE_GATES
    with pytest.raises(ValueError, match=r"PROFILE=lab names v1\.37\.2's alpha gates"):
        check_profile("lab", "v1.36.3", "v1.37.2")
    with pytest.raises(ValueError, match="WORKLOAD_CLAIMS=1 turns gates on"):
        check_profile("defaults", "v1.37.2", "v1.37.2", workload_claims=True)
    check_profile("defaults", "v1.35.4", "v1.37.2")


def test_kube_controller_manager_is_never_handed_a_controller_it_does_not_know() -> None:
    assert dra_controllers("v1.35.4") == ("resourceclaim-controller", "device-taint-eviction-controller")
    assert dra_controllers("v1.36.3") == DRA_CONTROLLERS
    assert "resourcepoolstatusrequest" not in kcm_controllers(True, "v1.35.4")
    assert kcm_controllers(False, "v1.37.2") == DEFAULT_MODE_CONTROLLERS
    assert kcm_controllers(False, "v1.36.3", real_cluster=True) == (
        "*,-resourceclaim-controller,-device-taint-eviction-controller,-resourcepoolstatusrequest-controller"
    )


@pytest.mark.parametrize("upstream", [False, True])
def test_the_defaults_profile_starts_components_without_gates_or_runtime_config(
    tmp_path: Path, upstream: bool
) -> None:
    recorder = LaunchRecorder(_options(tmp_path, "v1.35.4", "defaults", upstream))
    state = recorder._up_once()
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        assert not any(
            a.startswith(("--feature-gates", "--runtime-config")) for a in recorder.spawned[name]
        ), name
    (controllers,) = [
        a for a in recorder.spawned["kube-controller-manager"] if a.startswith("--controllers=")
    ]
    assert controllers == f"--controllers={kcm_controllers(upstream, 'v1.35.4')}"
    assert (state.k8s_version, state.profile) == ("v1.35.4", "defaults")
    assert launcher.ClusterState.load(Path(state.dir)) == state


def test_the_kubelet_of_the_defaults_profile_names_no_gate(tmp_path: Path) -> None:
    layout = realnode.NodeLayout.of(tmp_path)
    config = realnode.kubelet_config(layout, tmp_path / "ca.crt", 1, 2, (), profile="defaults")
    assert config["featureGates"] == {}


def test_a_running_cluster_of_another_version_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = LaunchRecorder(_options(tmp_path, "v1.37.2", "lab"))._up_once()
    doc = {"mode": state.mode, "workload_claims": False, "k8s_version": "v1.37.2", "profile": "lab"}
    monkeypatch.setattr(launcher, "status", lambda directory: (0, doc))
    with pytest.raises(launcher.ClusterError, match=r"v1\.37\.2 lab, default mode is running"):
        launcher.up(_options(tmp_path, "v1.36.3", "defaults"), say=lambda _: None)
    assert launcher.up(_options(tmp_path, "v1.37.2", "lab"), say=lambda _: None) == (state, True)


def test_the_documented_support_matrix_is_the_one_the_version_pass_holds() -> None:
    text = INSTALL.read_text()
    found = re.search(r"<!-- support-matrix -->\n(.*?)<!-- /support-matrix -->", text, re.S)
    assert found, "docs/install.md lacks the support matrix markers"
    assert found.group(1) == matrix.render()


def test_every_cell_of_the_matrix_is_a_version_the_devcluster_builds() -> None:
    built = {tuple(int(x) for x in v.lstrip("v").split(".")[:2]) for v in build.supported_versions()}
    assert {(1, minor) for minor, _ in matrix.SERVED} <= built


def test_a_binding_timeout_is_given_only_where_binding_conditions_are_on(tmp_path: Path) -> None:
    for version, profile, given in (("v1.35.4", "defaults", False), ("v1.36.3", "defaults", True)):
        options = _options(tmp_path, version, profile)
        options.binding_timeout = "30s"
        config = LaunchRecorder(options)._scheduler_config(tmp_path / "kubeconfig")
        assert ("pluginConfig" in config["profiles"][0]) is given, version


def test_kind_gets_the_same_profile_and_controllers_per_version() -> None:
    doc = yaml.safe_load(kind_config(k8s_version="v1.35.4", profile="defaults"))
    assert doc["featureGates"] == {}
    assert doc["runtimeConfig"] == {}
    patch = yaml.safe_load(doc["nodes"][0]["kubeadmConfigPatches"][0])
    assert patch["controllerManager"]["extraArgs"]["controllers"] == kcm_controllers(False, "v1.35.4", True)
